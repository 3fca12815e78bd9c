#!/bin/bash
FA3_LIBRARY=$PWD/.prev/libfa3_late.so timeout 120 tools/run_python_tests.sh -p no:cacheprovider 2>&1 | tail -1
RUNS="l64:late:base:bf16:64:0,1:2048,4096,8192,16384 l128:late:base:bf16:128:0,1:2048,4096,8192,16384 l256:late:base:bf16:256:0,1:2048,8192" ROUNDS=4 TMO=200 .prev/k_ab.sh
