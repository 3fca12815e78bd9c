#!/bin/bash
# v88, call 3: the same library (93661a7c); the tests with a d256 causal deterministic
# [sanitize] case and a d256 case in Python's deterministic test: every backward GPU test but
# [large] (all of them on this binary: call 1 ran an earlier one), the sanitizers, Python.
# Carry build/libfa3.so, build/fa3_tests.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
pt_walk_first || exit 1
step bwd_tests 280 build/fa3_tests '[gpu][backward]~[large]'
step python 60 env FA3_REQUIRE_GPU=1 tools/run_python_tests.sh -q
step sanitize 240 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
