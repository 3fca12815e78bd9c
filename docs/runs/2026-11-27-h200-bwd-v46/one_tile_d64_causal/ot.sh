#!/bin/bash
RUNS="otb:ot:base:bf16:128:0:2048,4096,8192,16384 otf:ot:base:fp16:128:0:2048,4096,8192,16384 ocb2:oc:base:bf16:64:1:6144,8192,12288,16384 ocf2:oc:base:fp16:64:1:6144,8192,12288,16384" ROUNDS=6 TMO=200 .prev/k_ab.sh
