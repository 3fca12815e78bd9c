#!/usr/bin/env bash
# Runs the [gpu] tests under compute-sanitizer's memcheck, racecheck and synccheck tools.
# The sanitizers slow kernels down by orders of magnitude, so this runs the smaller shapes
# ([sanitize] cases); every tool must report 0 errors.
# usage: tools/sanitize.sh build/fa3_tests   ($SANITIZE_FILTER narrows the cases, e.g.
#        '[backward][sanitize]')
set -u
tests=${1:-build/fa3_tests}
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
if [ ! -x "$CS" ]; then
  echo "sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER); nothing checked." >&2
  exit 1
fi
status=0
for tool in memcheck racecheck synccheck; do
  echo "=== compute-sanitizer --tool $tool"
  "$CS" --tool "$tool" --error-exitcode 99 --print-limit 20 "$tests" "${SANITIZE_FILTER:-[sanitize]}" 2>&1 | tail -n 15
  rc=${PIPESTATUS[0]}
  echo "=== $tool: exit $rc"
  [ "$rc" = 0 ] || status=1
done
exit $status
