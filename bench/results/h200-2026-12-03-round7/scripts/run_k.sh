#!/bin/bash
# Call K: the three window kernels through one shared per-output helper (working tree) against HEAD, per kernel.
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
for t in before:$ROOT/.versus/var_before shared:$ROOT before2:$ROOT/.versus/var_before shared2:$ROOT; do
  name=${t%%:*}; dir=${t#*:}
  (cd $dir && PYTHONPATH=$dir timeout 110 python3 $ROOT/.versus/explore.py $name >> $OUT/explore_k.jsonl 2>> $OUT/explore_k.err; echo "$name rc=$?" >> $OUT/k.log)
done
cat $OUT/k.log; tail -3 $OUT/explore_k.err
