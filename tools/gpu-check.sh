#!/usr/bin/env bash
# Everything fa3 checks on a GPU machine, in one call (the device tool's machines are bare
# and each start costs minutes). Run from the repository root with a carried build/ (the
# tests step needs build/libfakecuda.so too, for its fake-driver cases).
#   tools/gpu-check.sh [STEP...]
#   steps: info layers tests tests-rest bench bench-bwd sass sanitize backward python compare compare-fp16 compare-quick side-by-side side-by-side-bwd grid ablation make configs forward tune-quick tune ab sweep-k kernels ncu-l2 ncu-source ncu-systems ncu-bwd clocks
#   side-by-side: bench/compare.py --side-by-side, bf16 then fp16 (a process each): this
#       build's build/libfa3.so, the previous build's .prev/libfa3.so and the public FA3 of
#       .anchors/fa3 (carry .prev and .anchors with build), same inputs, the order rotating
#       over rounds; $OUT/side_by_side_<dtype>.csv and .md (TFLOPS per system, this/prev,
#       this/public). ~1-2 min a dtype (each log starts with the run's estimate and ends
#       with its real time); $SIDE_BY_SIDE_ARGS adds options (e.g. --systems
#       fa3,fa3-prev,fa3-public,cudnn)
#   backward: the backward's GPU tests (without [large]), fa3-sass on its kernels and the
#       sanitizers on its [sanitize] cases
#   bench-bwd: fa3-bench's backward rows (bf16 and fp16, every head dim and mask, 1k and 2k)
#       and forward+backward rows (the same at 1k), each checked against float64
#   side-by-side-bwd: the same for the backward (bench/compare.py --side-by-side --direction
#       bwd), bf16 then fp16: fa3 (fa3.backward), the public FA3 of .anchors/fa3 and cuDNN
#       (torch.autograd.grad through each), every system's forward run once per input set
#       outside the timed region; gradients checked against float32 first; $OUT/
#       side_by_side_bwd_<dtype>.csv and .md (TFLOPS by 2.5x the forward's count,
#       this/public, fa3/cuDNN). Carry .anchors and build. ~2 min a dtype, 240 s at most
#       each (8 minutes for the step); the estimate is printed first (each log's first lines
#       and this step's own line); $SIDE_BY_SIDE_BWD_ARGS adds options (e.g. --systems
#       fa3,fa3-det,fa3-public,cudnn for the deterministic mode's cost)
#   ab: times each kernel named in $AB_CONFIGS (space-separated) on the paper grid of its
#       head dim and dtype (causal when its name says so), one after the other, for A/B
#       comparisons; $AB_SEQLENS narrows the grid (e.g. 1k,8k); $AB_BENCH lists the
#       fa3-bench binaries to time each kernel with, in turn (default build/fa3-bench; a
#       saved binary of the previous build compares a kernel with its former code)
#   sweep-k: times each kernel in $SWEEP_CONFIGS at seqlen_q = $SWEEP_Q (default 8k; paper grid
#       batch and heads) over seqlen_k = $SWEEP_K (default 512..8k): the slope is the cost of a
#       key block, the intercept the fixed cost of a tile (prologue, epilogue, scheduling); a
#       causal kernel (bottom-right aligned) gets seqlen_k - seqlen_q unmasked keys more per row
#   kernels: the test "every compiled forward kernel matches the reference" alone, for the
#       kernels whose names contain one of $FA3_TEST_KERNELS (e.g. _xt,_as): a first check
#       of new kernels, $KERNELS_LIMIT s at most (default 150: a hung kernel costs that, not
#       the whole tests step); unfiltered, with KERNELS_LIMIT=500, tests-rest's other half
#   ncu-source: ncu's per-instruction warp-state samples and executed-instruction counts for
#       each kernel in $NCU_CONFIGS at seqlen $NCU_SEQLEN, as $OUT/source_<kernel>.csv.gz;
#       tools/ncu_source_blocks.py sums them per straight-line block (mainloop, masked step,
#       epilogue...): where a kernel's issue slots and stalls go
#   ncu-l2: ncu's L2 and tensor-pipe counters for each kernel in $NCU_CONFIGS on the paper
#       grid shape at seqlen $NCU_SEQLEN (default 8192; causal when the name says so): how
#       many L2 sector reads serve the sectors the SMs receive, and the
#       elapsed cycles at ncu's locked clock (scheduling without the power cap);
#       $NCU_SHAPES, fa3-bench shape options separated by ';' (e.g. "--seqlen 8k;--seqlen
#       16k --batch 1 --heads 8"), times each kernel on each shape instead;
#       tools/ncu_l2_table.py prints the log as one row per kernel and shape
#   clocks: bench/clock_trace.py $CLOCK_ARGS (default d128 bf16 non-causal 4k-16k, fa3 and
#       cuDNN): each system's time in blocks of calls next to the SM clock and power that
#       nvidia-smi sampled during the block, TFLOPS per GHz and per kW;
#       CLOCK_ARGS="--energy --systems= --kernels A,B": ~1 s blocks of back-to-back calls, the
#       kernels' sustained speed at the power cap; CLOCK_ARGS="--direction bwd --hdim 64
#       --causal 1 --systems fa3,fa3-public --public-fa3 .anchors/fa3": the backward alone
#   ncu-systems: one compare.py cell ($PROFILE_ARGS, default --hdim 64 --seqlen 1024 --causal 1)
#       profiled for each system in $PROFILE_SYSTEMS (default fa3 cudnn) through
#       bench/profile_call.py: the kernels a call launches, then the attention kernel's
#       sections, $OUT/raw_<system>.csv.gz (every metric) and source_<system>.csv.gz (SASS)
# Logs go to $OUT (or ./gpu-out) as <step>.log; a summary line per step is printed last. The
# exit status is 1 when a step failed (its rc is in the summary), else 0.
set -u
export OUT=${OUT:-gpu-out}  # also for the steps that run in a bash -c of their own
mkdir -p "$OUT"
steps=("$@")
# compare's figure where matplotlib is there (compare.py refuses --png without it).
png=()
python3 -c "import matplotlib" 2>/dev/null && png=(--png "$OUT/compare.png")
# The default fits one device call (600 s): the whole test binary (~440 s on an H200, v65;
# its [layers] cases included, so no layers step of their own) and one checked benchmark.
[ ${#steps[@]} -gt 0 ] || steps=(info tests bench)
summary=()

# The carried build/ is authoritative: make must not try to rebuild it here (no catch2). One
# time stamp for all: touched one by one, a target could end up older than its inputs.
now=$(date +%s.%N)
find build -exec touch -d "@$now" {} + 2>/dev/null

# fa3-bench's problem options for one kernel name: its dtype, head dim and causal flag.
kernel_args() {
  local k=$1 d t c=0
  d=${k#*_d}; d=${d%%_*}; t=${k#fa3_fwd_}; t=${t%%_*}
  case $k in *_causal) c=1 ;; esac
  echo "--dtype $t --hdim $d --causal $c"
}
export -f kernel_args

run_step() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*"
  local start=$SECONDS
  timeout --signal=KILL "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  # fa3_tests passes with every [gpu] test skipped when the driver is unusable (its first
  # line says so): on the GPU machine that is a failure.
  if [ $rc -eq 0 ] && grep -q "skipping every \[gpu\] test" "$OUT/$name.log"; then
    echo "$name: every [gpu] test was skipped" >> "$OUT/$name.log"
    rc=1
  fi
  tail -n 25 "$OUT/$name.log"
  summary+=("$name: rc=$rc ($((SECONDS - start)) s)")
  [ $rc -eq 0 ] || failed=1
}
failed=0

for step in "${steps[@]}"; do
  case $step in
    info)
      run_step info 30 bash -c 'nvidia-smi; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv' ;;
    layers)
      run_step layers 120 build/fa3_tests '[layers]' ;;
    tests)
      # The whole binary: ~440 s on an H200 (v65): the compiled-kernel case 103 s, the rest
      # 337 s, of which the backward's cases ~280 s (2^31 elements 69 s). Near the limit on a
      # slower GPU: then run kernels and tests-rest in two calls.
      run_step tests 580 build/fa3_tests --durations yes ;;
    tests-rest)
      # Every case but the kernels step's: with KERNELS_LIMIT=500 tools/gpu-check.sh kernels
      # (FA3_TEST_KERNELS unset), the whole binary in two calls. 337 s on an H200 (v65; a
      # 320-s limit had killed it after 112 of 191 cases).
      run_step tests-rest 480 build/fa3_tests --durations yes "~every compiled forward kernel matches the reference" ;;
    bench)
      run_step bench 120 build/fa3-bench --dtype bf16 --hdim 128 --seqlen 8192 --batch 2 --heads 16 --causal 0 --check ;;
    sass)
      # The report (text, JSON, SVG of the mainloops) and every kernel's SASS as fixtures.
      run_step sass 300 build/fa3-sass --lib build/libfa3.so --svg "$OUT/mainloops.svg" \
        --dump-sass "$OUT/sass"
      run_step sass-json 300 bash -c 'build/fa3-sass --lib build/libfa3.so --json > "$OUT/sass.json"'
      tar czf "$OUT/sass.tgz" -C "$OUT" sass && rm -rf "$OUT/sass" ;;
    sanitize)
      run_step sanitize 500 tools/sanitize.sh build/fa3_tests ;;
    backward)
      # The backward alone: its GPU tests (not [large]), fa3-sass on its kernels, and the
      # three sanitizers on its [sanitize] cases.
      run_step backward-tests 300 build/fa3_tests '[gpu][backward]~[large]'
      run_step backward-sass 120 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*'
      run_step backward-sanitize 300 env SANITIZE_FILTER='[backward][sanitize]' \
        tools/sanitize.sh build/fa3_tests ;;
    bench-bwd)
      # fa3-bench's backward and forward+backward rows, each checked against float64 (a
      # failed check exits 1): both dtypes, every head dim and mask; 1k and 2k, fwdbwd 1k.
      run_step bench-bwd 240 build/fa3-bench --direction bwd --dtype bf16,fp16 --seqlen 1k,2k --check
      run_step bench-fwdbwd 240 build/fa3-bench --direction fwdbwd --dtype bf16,fp16 --seqlen 1k --check ;;
    python)
      # FA3_REQUIRE_GPU=1: no PyTorch, no CUDA or no pytest here fails the step (the GPU
      # tests would otherwise skip and the run pass).
      run_step python 300 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh ;;
    compare)
      run_step compare 550 env PYTHONUNBUFFERED=1 python3 bench/compare.py --csv "$OUT/compare.csv" ${png[@]+"${png[@]}"} ;;
    compare-fp16)
      # The same grid in fp16 (the anchors are bf16; bench/vs_anchors.py reads both CSVs).
      run_step compare-fp16 550 env PYTHONUNBUFFERED=1 python3 bench/compare.py --dtype fp16 \
        --csv "$OUT/compare_fp16.csv" ;;
    compare-quick)
      run_step compare 300 env PYTHONUNBUFFERED=1 python3 bench/compare.py --quick --csv "$OUT/compare.csv" ${png[@]+"${png[@]}"} ;;
    side-by-side)
      # 240 s each, so both dtypes stay within 8 minutes even if the estimate is off by 3x;
      # the tables are rewritten after every shape, so a killed run keeps what it measured.
      for dtype in bf16 fp16; do
        run_step side-by-side-$dtype 240 env PYTHONUNBUFFERED=1 FA3_LIBRARY="$PWD/build/libfa3.so" \
          python3 bench/compare.py --side-by-side --dtype $dtype --prev-lib .prev/libfa3.so \
          --public-fa3 .anchors/fa3 --out-dir "$OUT" ${SIDE_BY_SIDE_ARGS:-}
      done ;;
    side-by-side-bwd)
      # As side-by-side: 240 s a dtype, tables rewritten after every shape. The estimate
      # (compare.py's model, deliberately slow) is printed before anything runs.
      for dtype in bf16 fp16; do
        python3 bench/compare.py --side-by-side --direction bwd --dtype $dtype \
          --estimate-only ${SIDE_BY_SIDE_BWD_ARGS:-} | sed "s/^/side-by-side-bwd-$dtype (timeout 240 s): /"
      done
      for dtype in bf16 fp16; do
        run_step side-by-side-bwd-$dtype 240 env PYTHONUNBUFFERED=1 FA3_LIBRARY="$PWD/build/libfa3.so" \
          python3 bench/compare.py --side-by-side --direction bwd --dtype $dtype \
          --public-fa3 .anchors/fa3 --out-dir "$OUT" ${SIDE_BY_SIDE_BWD_ARGS:-}
      done ;;
    grid)
      run_step grid 400 build/fa3-bench --csv "$OUT/grid.csv" ;;
    make)
      # The README's commands, literally (the carried build/ is up to date: nothing compiles).
      run_step make-test 500 make test
      run_step make-bench 120 make bench
      run_step make-sass-check 120 make sass-check ;;
    configs)
      # Every compiled kernel on the paper-grid shapes of 2k and 8k: the tuning table's input.
      run_step configs 400 build/fa3-bench --all-configs --no-baseline --seqlen 2k,8k \
        --csv "$OUT/configs.csv" ;;
    tune-quick)
      run_step tune-quick 300 build/fa3-tune --quick --out "$OUT/tuning_table_quick.json" ;;
    tune)
      run_step tune 580 build/fa3-tune --out "$OUT/tuning_table.json" ;;
    forward)
      run_step forward 400 build/fa3_tests '[forward]' ;;
    ablation)
      # In rounds with cooldown (fa3-tune's method): back to back, the rows' 30-launch medians
      # spread by several percent at the power cap.
      run_step ablation 300 build/fa3-bench --ablation --check --rounds 5 --cooldown 1 ;;
    ab)
      run_step ab 500 bash -c 'set -o pipefail; rc=0
        for k in $AB_CONFIGS; do for b in ${AB_BENCH:-build/fa3-bench}; do
        echo "### $k ($b)"
        $b --config "$k" --no-baseline $(kernel_args "$k") ${AB_SEQLENS:+--seqlen $AB_SEQLENS} | grep -v "^#" || rc=1; done; done; exit $rc' ;;
    sweep-k)
      run_step sweep-k 500 bash -c 'set -o pipefail; rc=0
        for k in $SWEEP_CONFIGS; do echo "### $k"
        for sk in ${SWEEP_K:-512 1024 2048 4096 8192}; do
          build/fa3-bench --config "$k" --no-baseline $(kernel_args "$k") --seqlen-q ${SWEEP_Q:-8192} --seqlen-k $sk | grep -v "^#" || rc=1; done; done; exit $rc' ;;
    kernels)
      run_step kernels "${KERNELS_LIMIT:-150}" build/fa3_tests --durations yes \
        "every compiled forward kernel matches the reference" ;;
    ncu-l2)
      run_step ncu-l2 500 bash -c 'set -o pipefail; rc=0; M=dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_sectors.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.max,sm__inst_executed.sum,gpc__cycles_elapsed.max
        IFS=";" read -ra shapes <<< "${NCU_SHAPES:---seqlen ${NCU_SEQLEN:-8192}}"
        for k in $NCU_CONFIGS; do for shape in "${shapes[@]}"; do echo "### $k $shape"
          ncu --kernel-name regex:fa3_fwd --launch-skip 5 --launch-count 1 --metrics $M build/fa3-bench --config $k --no-baseline $(kernel_args "$k") $shape --warmup 5 --iters 1 2>&1 | grep -E "^ +[a-z0-9]+__" || rc=1; done; done; exit $rc' ;;
    ncu-source)
      run_step ncu-source 500 bash -c 'set -o pipefail; rc=0; for k in $NCU_CONFIGS; do echo "### $k"
        ncu --kernel-name regex:fa3_fwd --launch-skip 3 --launch-count 1 --set none \
          --section SourceCounters --section WarpStateStats -o "$OUT/ncu_$k" -f \
          build/fa3-bench --config $k --no-baseline $(kernel_args "$k") --seqlen ${NCU_SEQLEN:-8192} \
          --warmup 3 --iters 1 2>&1 | grep -v "^#" || rc=1
        ncu -i "$OUT/ncu_$k.ncu-rep" --page source --csv --print-source sass | gzip > "$OUT/source_$k.csv.gz" || rc=1
        rm -f "$OUT/ncu_$k.ncu-rep"; done; exit $rc' ;;
    ncu-bwd)
      # One backward cell ($PROFILE_ARGS, default --hdim 128 --seqlen 8192 --causal 1)
      # profiled for each system in $PROFILE_SYSTEMS (default fa3 fa3-public; carry .anchors):
      # the main backward kernel's throughput, pipes, warp states and memory sections, and
      # fa3's per-instruction SASS samples as $OUT/source_bwd_<system>.csv.gz.
      run_step ncu-bwd 500 bash -c 'set -o pipefail; rc=0; cd bench; for s in ${PROFILE_SYSTEMS:-fa3 fa3-public}; do
        echo "### $s ${PROFILE_ARGS:=--hdim 128 --seqlen 8192 --causal 1}"
        ncu --kernel-name-base demangled \
          --kernel-name regex:"FlashAttnBwdSm90|cudnn.*(dgrad|bprop|bwd)|^fa3_bwd_[a-z0-9_]*(causal|_fs|_pt|_dq[hqt]|_rw|_lf)$" \
          --launch-skip 1 --launch-count 1 --set none --section SpeedOfLight \
          --section ComputeWorkloadAnalysis --section InstructionStats --section LaunchStats \
          --section Occupancy --section WarpStateStats --section SchedulerStats \
          --section MemoryWorkloadAnalysis --section SourceCounters -o "$OUT/ncu_bwd_$s" -f \
          python3 profile_call.py --system $s --public-fa3 ../.anchors/fa3 --direction bwd \
          $PROFILE_ARGS 2>&1 | tail -3 || rc=1
        ncu -i "$OUT/ncu_bwd_$s.ncu-rep" --page details 2>&1 | grep -v "^    ---" || rc=1
        ncu -i "$OUT/ncu_bwd_$s.ncu-rep" --page source --csv --print-source sass | gzip > "$OUT/source_bwd_$s.csv.gz" || rc=1
        rm -f "$OUT/ncu_bwd_$s.ncu-rep"; done; exit $rc' ;;
    clocks)
      run_step clocks 300 env PYTHONUNBUFFERED=1 python3 bench/clock_trace.py --json "$OUT/clocks.json" ${CLOCK_ARGS:---seqlens 4096,8192,16384} ;;
    ncu-systems)
      # One compare.py cell profiled for each system: every kernel a call launches (name,
      # grid, registers, time), then the attention kernel's throughput, pipe and instruction
      # sections, all its raw metrics and its per-instruction SASS counts (cuDNN's too).
      run_step ncu-systems 500 bash -c 'set -o pipefail; rc=0; cd bench; for s in ${PROFILE_SYSTEMS:-fa3 cudnn}; do
        echo "### $s ${PROFILE_ARGS:=--hdim 64 --seqlen 1024 --causal 1}"
        ncu --launch-skip 3 --launch-count 16 --set none --section LaunchStats \
          --metrics gpu__time_duration.sum python3 profile_call.py --system $s $PROFILE_ARGS 2>&1 |
          grep -E "^  [a-zA-Z_]|Grid Size|Registers Per|Block Size|Shared Memory Config|Dynamic Shared|gpu__time_duration|Cluster" || rc=1
        ncu --kernel-name regex:"fa3_fwd|sdpa|fmha|flash|attn|fprop" --launch-skip 1 --launch-count 1 \
          --set none --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
          --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
          --section MemoryWorkloadAnalysis --section SourceCounters -o "$OUT/ncu_$s" -f \
          python3 profile_call.py --system $s $PROFILE_ARGS 2>&1 | tail -3 || rc=1
        ncu -i "$OUT/ncu_$s.ncu-rep" --page details 2>&1 | grep -v "^    ---" || rc=1
        ncu -i "$OUT/ncu_$s.ncu-rep" --page raw --csv --print-metric-instances values | gzip > "$OUT/raw_$s.csv.gz" || rc=1
        ncu -i "$OUT/ncu_$s.ncu-rep" --page source --csv --print-source sass | gzip > "$OUT/source_$s.csv.gz" || rc=1
        rm -f "$OUT/ncu_$s.ncu-rep"; done; exit $rc' ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $failed
