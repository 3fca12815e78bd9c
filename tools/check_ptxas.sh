#!/usr/bin/env bash
# Fails the build on ptxas output that means a slow or broken kernel: serialized wgmma
# (C7515/C7511/C7509 and the like), ignored setmaxnreg (C7508), spills, or a stack frame.
# usage: check_ptxas.sh [--report-only] LOG    (--report-only: print, never fail; debug builds)
set -u
report_only=0
if [ "$1" = --report-only ]; then report_only=1; shift; fi
log=$1
bad=$(grep -E "serialized|C75[0-9][0-9]|[1-9][0-9]* bytes spill (stores|loads)|[1-9][0-9]* bytes stack frame" "$log")
if [ -n "$bad" ]; then
  if [ $report_only = 1 ]; then
    echo "ptxas (debug build, not enforced): $bad" | head -n 2 >&2
  else
    echo "ptxas reported a slow or broken kernel ($log):" >&2
    echo "$bad" >&2
    exit 1
  fi
fi
grep -q "Function properties for" "$log" || { echo "ptxas -v printed no resource report in $log" >&2; exit 1; }
exit 0
