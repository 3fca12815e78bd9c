#!/bin/bash
nvidia-smi --query-gpu=name --format=csv,noheader
SANITIZE_FILTER="the postprocess converts each pair*" timeout 560 tools/sanitize.sh build/fa3_tests 2>&1 | grep -E "===|ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" 
