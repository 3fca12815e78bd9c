#!/bin/bash
# v89, call 4: v88's final library again (d8bb967e, rebuilt from HEAD after v89's converters
# were taken out): fa3-sass, the backward's [large] cases, the sanitizers on [backward][sanitize]
# (call 1 ran the other GPU tests on these bytes).
# Carry build/libfa3.so, build/fa3_tests, build/fa3-sass.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests build/fa3-sass
step sass 100 build/fa3-sass --lib build/libfa3.so
step bwd_large 150 build/fa3_tests '[gpu][backward][large]'
step sanitize 220 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
