#!/bin/bash
# v90, call 3: the forward GPU tests and the three sanitizers on the backward's sanitize cases,
# this build. Carry build/libfa3.so, build/fa3_tests.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
step sanitize 250 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
step fwd_tests 220 build/fa3_tests '[gpu]~[backward]~[large]'
