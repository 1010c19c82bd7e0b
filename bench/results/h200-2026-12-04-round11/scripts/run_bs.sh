#!/bin/bash
# Call B11 (tree eaaafce): block sizes 1 to 256, graph replay, full grid and 40 programs.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/bs.log; date -u >> $OUT/bs.log
timeout 250 python3 .versus/sweep_bs.py "1,8192,512 1,8192,128" 1,2,4,8,16,32,64,128,256 > $OUT/bs_r1.jsonl 2> $OUT/bs_r1.err
echo "r1 rc=$?" >> $OUT/bs.log; date -u >> $OUT/bs.log
timeout 280 python3 .versus/sweep_bs.py "8,131072,128 8,131072,512" 1,4,8,16,64,128,256 > $OUT/bs_r8.jsonl 2> $OUT/bs_r8.err
echo "r8 rc=$?" >> $OUT/bs.log; date -u >> $OUT/bs.log
cat $OUT/bs.log; cat $OUT/bs_r1.jsonl $OUT/bs_r8.jsonl; grep -v Warning $OUT/bs_r1.err $OUT/bs_r8.err | tail -5
