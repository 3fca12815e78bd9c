#!/bin/bash
# v88, call 2: the same library; the tests binary with the bad-input test's expected sentence
# mended (dv->heads is held to v->heads): that test, the sanitizers on the backward's [sanitize]
# cases, the forward's GPU tests, and the backward's [large] cases (over 2^31 elements).
# Carry build/libfa3.so, build/fa3_tests.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
step bad_input 60 build/fa3_tests 'fa3_backward refuses bad arguments on real memory*'
step sanitize 260 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
step fwd_tests 200 build/fa3_tests '[gpu]~[backward]~[large]'
step bwd_large 120 build/fa3_tests '[gpu][backward][large]'
