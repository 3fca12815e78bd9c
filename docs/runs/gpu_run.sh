# Sourced by the one-off GPU run scripts of docs/runs/*/ (from the repository root, $OUT set by
# the device tool) for what each of them needs first: their steps' logs and the A/Bs of the
# backward. tools/gpu-check.sh's run_step is the same idea for the standing checks; these
# keep each step's status and time in its own log, as the records' archives carry the logs alone.

# gpu_run_header FILE...: the carried build's files made newer than their sources (so that
# nothing rebuilds), the GPU and driver, then each FILE's md5, in $OUT/gpu.txt.
gpu_run_header() {
  local now; now=$(date +%s.%N)  # one time stamp for all (one by one, a target could
  find build .prev -exec touch -d "@$now" {} + 2>/dev/null  # end up older than its inputs)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
  md5sum "$@" | tee -a "$OUT/gpu.txt"
}

# step NAME LIMIT CMD...: CMD's output in $OUT/NAME.log, its status and time last (killed
# after LIMIT seconds); the log's last lines printed.
step() {
  local name=$1 limit=$2; shift 2
  local s=$SECONDS
  timeout --signal=KILL "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "rc=$? $((SECONDS - s)) s" >> "$OUT/$name.log"
  tail -3 "$OUT/$name.log"
}

# churn LABEL RUNS CMD...: CMD (a test process) up to RUNS times, stopping at the first that
# fails or hangs (100 s); each run's first failure lines and last lines in $OUT/churn.log,
# under "== LABEL run i". Fails if a run did. (The concurrency tests of v82-v83: a hang there
# is many calls unfinished, which the tests bound and print.)
churn() {
  local label=$1 runs=$2 i; shift 2
  for i in $(seq 1 "$runs"); do
    step run 100 "$@"
    { echo "== $label run $i"; grep -m3 "illegal\|unfinished\|FAILED" "$OUT/run.log";
      tail -n 3 "$OUT/run.log"; } >> "$OUT/churn.log"
    grep -q "^rc=0" "$OUT/run.log" || return 1
  done
}

# pt_walk_first: the _pt walk test first (a wrong barrier count hangs: 120 s); fails if it did.
pt_walk_first() {
  step pt_walk 120 build/fa3_tests 'the persistent (_pt) kernels walk several tiles a CTA'
  grep -q "^rc=0" "$OUT/pt_walk.log"
}

# ab_bwd NAME PREV_LIB HDIMS CAUSAL SEQLENS ROUNDS [SYSTEMS]: the backward of this build /
# PREV_LIB (as fa3-prev; fa3-prev-det its deterministic mode) / the public FA3 in one process
# per dtype, the order rotating; SYSTEMS (default fa3,fa3-prev,fa3-public)
# picks others, $AB_DTYPES (default "bf16 fp16") the dtypes, $AB_LIB (default this build's
# build/libfa3.so) the library timed as fa3, e.g. a diagnostic build carried without build/;
# logs $OUT/NAME_<dtype>.log, tables in $OUT/NAME_<dtype>/.
ab_bwd() {
  local dtype systems=${7:-fa3,fa3-prev,fa3-public} public=()
  [[ ,$systems, == *,fa3-public,* ]] && public=(--public-fa3 .anchors/fa3)
  for dtype in ${AB_DTYPES:-bf16 fp16}; do
    mkdir -p "$OUT/$1_$dtype"
    step "$1_$dtype" 200 env PYTHONUNBUFFERED=1 FA3_LIBRARY="${AB_LIB:-$PWD/build/libfa3.so}" \
      python3 bench/compare.py --side-by-side --direction bwd --dtype $dtype --hdims "$3" \
      --causal "$4" --seqlens "$5" --systems "$systems" --rounds "$6" \
      --prev-lib "$2" "${public[@]}" --out-dir "$OUT/$1_$dtype"
  done
}
