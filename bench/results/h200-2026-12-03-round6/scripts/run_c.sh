#!/bin/bash
# Call C: per-kernel device time on the 8192-token cases, full grid: a546316 (base), this tree (cur), the merge unpeeled for one piece a program (v1).
set -u
export PYTHONUNBUFFERED=1 EXPLORE_CASES="1,8192,128 1,8192,256 1,8192,512" EXPLORE_CORES=full
ROOT=$PWD
for t in base:$ROOT/.versus/base cur:$ROOT v1:$ROOT/.versus/v1; do
  name=${t%%:*}; dir=${t#*:}
  (cd $dir && PYTHONPATH=$dir timeout 100 python3 $ROOT/.versus/explore.py $name >> $OUT/explore_r1.jsonl 2>> $OUT/explore_r1.err; echo "$name rc=$?" >> $OUT/c.log)
done
cat $OUT/c.log; cat $OUT/explore_r1.jsonl
