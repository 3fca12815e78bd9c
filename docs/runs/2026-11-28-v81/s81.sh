#!/bin/bash
# v81: the binding's handle= (a tuning table of the caller's from Python), the forward tests'
# negative controls and a K/V-over-2^31 forward case, and the review's mends on the GPU.
#   a: the forward negative controls first, the forward GPU tests (not [large]), the backward
#      GPU tests' quick ones, the whole Python suite (test_handle.py new)
#   b: the forward [large] cases (Q/O and now K/V past 2^31)
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so
case ${1:-a} in
  a)
    step fwd_controls 120 build/fa3_tests 'the checks fail on a tampered O and LSE (negative controls)'
    step python 200 tools/run_python_tests.sh -q
    step forward 330 build/fa3_tests '[gpu][forward]~[large]' ;;
  b)
    step forward_large 560 build/fa3_tests '[gpu][forward][large]' ;;
esac
