#!/bin/bash
# v83: a diagnostic build with programmatic dependent launch back on (kBackwardProgrammaticLaunch
# = true in a copy of backward_launch.h, taken before the real one): build/diag/PDL/ holds
# backward_launch.o, libfa3.a and libfa3.so with it, and fa3_tests linked against that libfa3.a.
# Everything else is the current build's (run `make` first). From the repository root.
# Since v85 the steps are docs/runs/2026-11-29-v85/build_pdl_diag.sh's, which also builds from
# the debug tree; with B=build it does what this script did.
set -euo pipefail
B=build exec "$(dirname "$0")/../2026-11-29-v85/build_pdl_diag.sh"
