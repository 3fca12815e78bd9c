#!/bin/bash
RUNS="ocb:oc:base:bf16:64:1:2048,4096,8192,16384 ocf:oc:base:fp16:64:1:2048,4096,8192,16384 ofb:of:base:bf16:64:1:2048,4096,8192,16384" ROUNDS=6 TMO=180 .prev/k_ab.sh
