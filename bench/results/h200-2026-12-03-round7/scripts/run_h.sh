#!/bin/bash
# Call H: the default's bf16 epilogue picking the RoPE row from c (working tree) against HEAD (var_before).
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
for t in before:$ROOT/.versus/var_before ropefirst:$ROOT; do
  name=${t%%:*}; dir=${t#*:}
  (cd $dir && PYTHONPATH=$dir EXPLORE_ROUTES=ascend timeout 120 python3 $ROOT/.versus/explore.py $name >> $OUT/explore_h.jsonl 2>> $OUT/explore_h.err; echo "$name rc=$?" >> $OUT/h.log)
done
cat $OUT/h.log; tail -3 $OUT/explore_h.err
