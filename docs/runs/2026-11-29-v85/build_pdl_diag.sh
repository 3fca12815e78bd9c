#!/bin/bash
# v85: v83's diagnostic build (docs/runs/2026-11-28-v83/build_pdl_diag.sh, which now runs this
# one with B=build) for either build tree: programmatic dependent launch back on
# (kBackwardProgrammaticLaunch = true in a copy of backward_launch.h) in
# $B/diag/PDL/{backward_launch.o,libfa3.a,libfa3.so,fa3_tests}, everything else $B's.
# B=build (after `make`) or B=build-debug (after `make DEBUG=1 build-debug/fa3_tests`: kernels
# whose mbarrier and counter waits trap with a message after ~2^34 cycles). From the repository
# root.
set -euo pipefail
B=${B:-build}
MAKEARGS=()
[ "$B" = build-debug ] && MAKEARGS=(DEBUG=1)
D=$B/diag/PDL
rm -rf "$D" && mkdir -p "$D/inc/runtime"
sed 's/^constexpr bool kBackwardProgrammaticLaunch = false;$/constexpr bool kBackwardProgrammaticLaunch = true;/' \
  src/runtime/backward_launch.h > "$D/inc/runtime/backward_launch.h"
grep -q '^constexpr bool kBackwardProgrammaticLaunch = true;' "$D/inc/runtime/backward_launch.h"
g++ -O2 -std=c++17 -Wall -Wextra -fPIC -I"$D/inc" -Iinclude -Isrc -I/usr/local/cuda/include \
  -c -o "$D/backward_launch.o" src/runtime/backward_launch.cpp
objs=$(make -s -n "${MAKEARGS[@]}" -W "$B/obj/src/api.o" "$B/libfa3.so" | grep -- "-shared -o $B/libfa3.so" | grep -o "$B/obj/[^ ]*\.o")
objs=${objs//$B\/obj\/src\/runtime\/backward_launch.o/$D/backward_launch.o}
grep -q "$D/backward_launch.o" <<<"$objs"
g++ -shared -o "$D/libfa3.so" $objs -Wl,--version-script=src/libfa3.map -ldl -lpthread
rm -f "$D/libfa3.a" && ar rcs "$D/libfa3.a" $objs
link=$(make -s -n "${MAKEARGS[@]}" "$B/fa3_tests" -W "$B/libfa3.a" | grep -- "-o $B/fa3_tests ")
link=${link//-o $B\/fa3_tests /-o $D/fa3_tests }
eval "${link//$B\/libfa3.a/$D/libfa3.a}"
ls -l "$D"
