#!/bin/bash
# Call ZY (tree 1a99254): per-kernel device time at 40 programs on the cases that now split.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD EXPLORE_CORES=40 EXPLORE_CASES="8,65536,128 8,131072,128 8,131072,256 4,32768,128"
timeout 200 python3 .versus/explore.py 1a99254 > $OUT/zy.log 2>&1
grep -v Warning $OUT/zy.log | cut -c1-600
