#!/bin/bash
# v81: the binding's handle= (a tuning table of the caller's from Python), the forward tests'
# negative controls, and the runtime review's mends (tile counters zeroed on a stream of the
# handle's own, caches keyed by cuCtxGetId, the table's pick the library's kernel) on the GPU.
#   a: the new GPU tests first, the whole Python suite (test_handle.py new), every [gpu] test
#      but the [large] ones
#   b: the [large] cases (backward; forward Q/O and now K/V past 2^31)
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
# One spec (commas: any of them); names with commas would be split.
NEW_TESTS='the checks fail on a tampered O*,a first tile-drawing*,one handle in contexts*'
case ${1:-a} in
  a)
    step new 150 build/fa3_tests --durations yes "$NEW_TESTS"
    step python 120 tools/run_python_tests.sh -q
    step tests 420 build/fa3_tests --durations yes '[gpu]~[large]' ;;
  b)  # after a: the new tests' and test_handle.py's mends, then the [large] cases
    step new 150 build/fa3_tests --durations yes "$NEW_TESTS"
    step python 120 tools/run_python_tests.sh -q
    step large 560 build/fa3_tests --durations yes '[gpu][large]' ;;
esac
