#!/bin/bash
# session 54, v54c: K_j and V_j of the _pt kernels loaded by a thread of their own (bwd_kv_loader).
#   s54c.sh a: the _pt walk test (a wrong barrier count hangs: 120 s), the A/B against v54a's
#              library (.prev/libfa3.so): d64 causal 1k-16k, d128 both masks 1k-4k, 8 rounds;
#              then (not with `a quick`) the backward GPU tests
#   s54c.sh b: the sanitizers on [backward][sanitize], fa3-sass on the backward kernels
cd "$(dirname "$0")/../../.."
find build .prev -exec touch {} + 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
md5sum build/libfa3.so .prev/libfa3.so | tee -a $OUT/gpu.txt
step() {  # step NAME LIMIT CMD...: CMD's output in $OUT/NAME.log, its status and time last
  local name=$1 limit=$2; shift 2
  local s=$SECONDS
  timeout --signal=KILL "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "rc=$? $((SECONDS - s)) s" >> "$OUT/$name.log"
  tail -3 "$OUT/$name.log"
}
ab() {  # ab NAME HDIM CAUSAL SEQLENS: this build / .prev/libfa3.so / public FA3, both dtypes, 8 rounds
  for dtype in bf16 fp16; do
    mkdir -p "$OUT/$1_$dtype"
    step $1_$dtype 200 env PYTHONUNBUFFERED=1 FA3_LIBRARY="$PWD/build/libfa3.so" \
      python3 bench/compare.py --side-by-side --direction bwd --dtype $dtype --hdims $2 \
      --causal $3 --seqlens $4 --systems fa3,fa3-prev,fa3-public --rounds 8 \
      --prev-lib .prev/libfa3.so --public-fa3 .anchors/fa3 --out-dir "$OUT/$1_$dtype"
  done
}
if [ "$1" = a ]; then
  step pt_walk 120 build/fa3_tests 'the persistent (_pt) kernels walk several tiles a CTA'
  grep -q "^rc=0" $OUT/pt_walk.log || exit 1
  ab ab_d64c 64 1 1024,2048,4096,8192,16384
  ab ab_d128 128 0,1 1024,2048,4096
  [ "$2" = quick ] || step tests 230 build/fa3_tests '[gpu][backward]~[large]'
else
  step sanitize 300 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
  step sass_bwd 40 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*'
fi
cd "$OUT" && tar czf "run_$1.tgz" --remove-files -- *.log *.txt */ 2>/dev/null; ls "$OUT"
