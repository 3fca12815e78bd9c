#!/bin/bash
# v83: a diagnostic build with programmatic dependent launch back on (kBackwardProgrammaticLaunch
# = true in a copy of backward_launch.h, taken before the real one): build/diag/PDL/ holds
# backward_launch.o, libfa3.a and libfa3.so with it, and fa3_tests linked against that libfa3.a.
# Everything else is the current build's (run `make` first). From the repository root.
set -euo pipefail
D=build/diag/PDL
rm -rf "$D" && mkdir -p "$D/inc/runtime"
sed 's/^constexpr bool kBackwardProgrammaticLaunch = false;$/constexpr bool kBackwardProgrammaticLaunch = true;/' \
  src/runtime/backward_launch.h > "$D/inc/runtime/backward_launch.h"
grep -q '^constexpr bool kBackwardProgrammaticLaunch = true;' "$D/inc/runtime/backward_launch.h"
g++ -O2 -std=c++17 -Wall -Wextra -fPIC -I"$D/inc" -Iinclude -Isrc -I/usr/local/cuda/include \
  -c -o "$D/backward_launch.o" src/runtime/backward_launch.cpp
objs=$(make -s -n -W build/obj/src/api.o build/libfa3.so | grep -- "-shared -o build/libfa3.so" | grep -o "build/obj/[^ ]*\.o")
objs=${objs//build\/obj\/src\/runtime\/backward_launch.o/$D/backward_launch.o}
g++ -shared -o "$D/libfa3.so" $objs -Wl,--version-script=src/libfa3.map -ldl -lpthread
rm -f "$D/libfa3.a" && ar rcs "$D/libfa3.a" $objs
link=$(make -s -n build/fa3_tests -W build/libfa3.a | grep -- '-o build/fa3_tests ')
link=${link//-o build\/fa3_tests /-o $D/fa3_tests }
eval "${link//build\/libfa3.a/$D/libfa3.a}"
ls -l "$D"
