#!/bin/bash
# session 65: the test binary with its CPU tests' files at -Og (Makefile, v65) on a GPU: the
# whole of fa3_tests in two steps (the forward kernel sweep alone, then every other case,
# [large] included). The library is commit 74d6a7b's (md5 in gpu.txt).
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh  # gpu_run_header, step
gpu_run_header build/libfa3.so build/fa3_tests
if [ "${1:-a}" = b ]; then
  step tests_b 400 build/fa3_tests --durations yes -f docs/runs/2026-11-28-v65/rest_names.txt
  grep -E 'All tests|test cases|FAILED|^rc=' "$OUT/tests_b.log" | tail -4
  grep -hE '^[0-9.]+ s: ' "$OUT/tests_b.log" | sort -rn | head -5
  exit
fi
step kernels 250 build/fa3_tests --durations yes 'every compiled forward kernel matches the reference'
step tests_rest 320 build/fa3_tests --durations yes '~every compiled forward kernel matches the reference'
for f in kernels tests_rest; do grep -E 'All tests|test cases|FAILED|skipping|^rc=' "$OUT/$f.log" | tail -4; done
grep -hE '^[0-9.]+ s: ' "$OUT"/*.log | sort -rn | head -8
# s65.sh's first call gave tests_rest 320 s, too few: it was killed after 112 of 191 cases,
# none failed. The second call runs the 20 GPU cases (forward, layers) it had not reached
# (rest_names.txt): s65.sh b. The 58 CPU cases it had not reached ran on the build machine.
# The third call (h200_c) ran the standing tool with its new limit:
#   timeout 560 tools/gpu-check.sh tests-rest
