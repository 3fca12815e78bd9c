#!/bin/bash
# mklib.sh NAME "old1=new1 old2=new2 ..." : a library whose table swaps kernels (extra cubins embedded)
set -e
cd /work/main
name=$1; swaps=$2
FWD=$(make -s -p -n 2>/dev/null | grep -E "^FWD_KERNELS :?=" | head -1 | sed 's/^FWD_KERNELS :*= //')
BWD=$(make -s -p -n 2>/dev/null | grep -E "^BWD_KERNELS :?=" | head -1 | sed 's/^BWD_KERNELS :*= //')
cp src/runtime/tuning_table.json /tmp/t_$name.json
extra=""
for s in $swaps; do
  old=${s%%=*}; new=${s##*=}
  python3 - /tmp/t_$name.json $old $new <<'PY'
import json, sys
p, old, new = sys.argv[1:]
t = json.load(open(p))
n = 0
for e in t["entries"] if "entries" in t else t["kernels"]:
    if e.get("kernel") == old:
        e["kernel"] = new; n += 1
        c = e.get("config", {})
        c["rotated_walk"] = "_rw" in new; c["first_store"] = "_fs" in new; c["persistent"] = "_pt" in new
assert n, old
json.dump(t, open(p, "w"), indent=2)
PY
  extra="$extra $new"
done
L=""; for k in $FWD $BWD; do L="$L build/cubin/$k.cubin"; done
for k in $extra; do case " $BWD " in *" $k "*) ;; *) L="$L build/cubin/$k.cubin";; esac; done
mkdir -p /tmp/g_$name
tools/gen_embedded.sh /tmp/g_$name/e.S /tmp/g_$name/e.cpp /tmp/t_$name.json $L
g++ -c -o /tmp/g_$name/es.o /tmp/g_$name/e.S
g++ -std=c++17 -fPIC -Iinclude -Isrc -c -o /tmp/g_$name/e.o /tmp/g_$name/e.cpp
g++ -shared -o .prev/libfa3_$name.so build/obj/src/runtime/*.o build/obj/src/api.o /tmp/g_$name/e.o /tmp/g_$name/es.o -Wl,--version-script=src/libfa3.map -ldl -lpthread
echo built .prev/libfa3_$name.so
