#!/bin/bash
# mkalt.sh NAME CUBINDIR: the production table and kernel set, cubins taken from CUBINDIR
set -e
cd /work/main
name=$1; dir=$2
FWD=$(make -s -p -n 2>/dev/null | grep -E "^FWD_KERNELS :?=" | head -1 | sed 's/^FWD_KERNELS :*= //')
BWD=$(make -s -p -n 2>/dev/null | grep -E "^BWD_KERNELS :?=" | head -1 | sed 's/^BWD_KERNELS :*= //')
L=""; for k in $FWD $BWD; do L="$L $dir/$k.cubin"; done
mkdir -p /tmp/g_$name
tools/gen_embedded.sh /tmp/g_$name/e.S /tmp/g_$name/e.cpp src/runtime/tuning_table.json $L
g++ -c -o /tmp/g_$name/es.o /tmp/g_$name/e.S
g++ -std=c++17 -fPIC -Iinclude -Isrc -c -o /tmp/g_$name/e.o /tmp/g_$name/e.cpp
g++ -shared -o .prev/libfa3_$name.so build/obj/src/runtime/*.o build/obj/src/api.o /tmp/g_$name/e.o /tmp/g_$name/es.o -Wl,--version-script=src/libfa3.map -ldl -lpthread
echo built .prev/libfa3_$name.so
