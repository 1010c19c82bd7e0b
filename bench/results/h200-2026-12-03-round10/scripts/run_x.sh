#!/bin/bash
# Call X: the harness's fixed cost (ideal reader, two L2 flushes), ours at 40 programs under both
# flushes, and the unsplit cases split as well.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/x.log
git log -1 --format=%H >> $OUT/x.log 2>&1
timeout 150 python3 .versus/harness.py reader > $OUT/reader.log 2>&1
X_BUSY=0.95,1.01 X_CASES="8,65536,128 8,131072,128 8,131072,256" timeout 150 python3 .versus/harness.py ours > $OUT/split.log 2>&1
timeout 250 python3 .versus/harness.py ours > $OUT/ours.log 2>&1
grep -v Warning $OUT/reader.log $OUT/split.log $OUT/ours.log | cut -c1-400
