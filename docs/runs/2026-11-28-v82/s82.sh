#!/bin/bash
# v82: the handle's backward workspaces as a pool passed between streams (an event after each
# call), and the tile counters found by hash, on the GPU.
#   a: the new and changed workspace tests first, the Python suite, every [gpu] test but the
#      [large] ones
#   b: the [large] cases
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
# One spec (commas: any of them).
NEW_TESTS='fa3_backward: streams made and dropped per call pass the handle*,fa3_backward: threads and streams at once*'
case ${1:-a} in
  a)
    step new 150 build/fa3_tests --durations yes "$NEW_TESTS"
    step python 120 tools/run_python_tests.sh -q
    step tests 420 build/fa3_tests --durations yes '[gpu]~[large]' ;;
  b)
    step new 150 build/fa3_tests --durations yes "$NEW_TESTS"
    step large 560 build/fa3_tests --durations yes '[gpu][large]' ;;
esac
