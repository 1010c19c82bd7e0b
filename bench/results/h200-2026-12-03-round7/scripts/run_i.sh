#!/bin/bash
# Call I: where the default's bf16 epilogue spends its time at 40 programs: ncu per-instruction
# samples of _gather_to_bf16_kernel and _fused_compress_kernel, and three timing-only variants.
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
export PYTHONPATH=$ROOT
timeout 200 ncu --clock-control none -k regex:"_gather_to_bf16_kernel|_fused_compress_kernel" -c 2 \
  --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
  python3 .versus/ncu_gather.py 8,65536,128 > $OUT/ncu_src.csv 2> $OUT/ncu_src.err
echo "ncu rc=$?" >> $OUT/i.log
for v in $(ls -d $ROOT/.versus/var_*); do
  name=$(basename $v)
  (cd $v && PYTHONPATH=$v EXPLORE_ROUTES=ascend EXPLORE_CORES=40 EXPLORE_CASES="8,65536,128 8,131072,256" timeout 60 python3 $ROOT/.versus/explore.py $name >> $OUT/explore_i.jsonl 2>> $OUT/explore_i.err; echo "$name rc=$?" >> $OUT/i.log)
done
EXPLORE_ROUTES=ascend EXPLORE_CORES=40 EXPLORE_CASES="8,65536,128 8,131072,256" timeout 60 python3 .versus/explore.py head >> $OUT/explore_i.jsonl 2>> $OUT/explore_i.err
echo "head rc=$?" >> $OUT/i.log
cat $OUT/i.log; tail -3 $OUT/ncu_src.err; wc -l $OUT/ncu_src.csv
