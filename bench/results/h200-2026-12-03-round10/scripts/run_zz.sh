#!/bin/bash
# Call ZZ (tree a60920e): per-kernel device time (torch.profiler) of the 8192-token cases at 40 programs.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD EXPLORE_CORES=40 EXPLORE_CASES="1,8192,128 1,8192,256 1,8192,512 8,131072,512"
timeout 200 python3 .versus/explore.py a60920e > $OUT/zz.log 2>&1
grep -v Warning $OUT/zz.log | cut -c1-600
