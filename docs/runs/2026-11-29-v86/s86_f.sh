#!/bin/bash
# v86: fa3-tune's table written under a 250-character name (its temporary file once took
# the name plus ".tmp.<pid>", too long). Carry build/fa3-tune, build/libfa3.so; logs in $OUT.
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3-tune
name=$(printf 't%.0s' $(seq 1 245)).json
step tune 300 build/fa3-tune --quick --direction fwd --dtype bf16 --hdim 128 --causal 0 \
  --out "$OUT/$name"
ls -la "$OUT" | tee -a "$OUT/tune.log"
cp "$OUT/$name" "$OUT/table.json" && rm "$OUT/$name"
