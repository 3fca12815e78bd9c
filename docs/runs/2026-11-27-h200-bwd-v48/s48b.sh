#!/bin/bash
# session 48: HEAD's backward checks (tests, fa3-sass, sanitizers, Python tests)
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== tests $(date +%T)"
timeout 330 build/fa3_tests '[gpu][backward]~[large]' 2>&1 | tee $OUT/tests.log | tail -3
echo "== sass $(date +%T)"
timeout 60 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*' > $OUT/sass.log 2>&1; echo rc $?; tail -1 $OUT/sass.log
echo "== sanitize $(date +%T)"
SANITIZE_FILTER="small backward cases for compute-sanitizer" timeout 150 tools/sanitize.sh build/fa3_tests > $OUT/sanitize.log 2>&1; echo rc $?; grep -iE "error summary|hazard|assertions|passed|failed" $OUT/sanitize.log | head -12
echo "== python $(date +%T)"
timeout 150 tools/run_python_tests.sh -p no:cacheprovider > $OUT/python.log 2>&1; echo rc $?; tail -2 $OUT/python.log
echo "== end $(date +%T)"
