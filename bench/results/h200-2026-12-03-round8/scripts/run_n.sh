#!/bin/bash
# Call N: where the piece gather's 40-program slowdown of call M comes from. Per-kernel explore of
# HEAD, the working tree (head store before pooling), masked head stores, and HEAD + tile runs only.
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
export EXPLORE_CASES="1,8192,128 1,8192,256 1,8192,512 4,32768,512 8,131072,512"
for t in head:$ROOT/.versus/head v1:$ROOT v1m:$ROOT/.versus/v1m unitonly:$ROOT/.versus/unitonly head2:$ROOT/.versus/head v1_2:$ROOT unitonly2:$ROOT/.versus/unitonly; do
  name=${t%%:*}; dir=${t#*:}
  (cd $dir && PYTHONPATH=$dir timeout 100 python3 $ROOT/.versus/explore.py $name >> $OUT/explore_n.jsonl 2>> $OUT/explore_n.err; echo "$name rc=$?" >> $OUT/n.log)
done
cat $OUT/n.log; tail -3 $OUT/explore_n.err
