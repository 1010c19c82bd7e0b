#!/bin/bash
# Call G: ncu on the default's unsplit gather and fused's kernel at 40 programs (R8-T131072-C256),
# then per-kernel times of a variant tree.
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
export PYTHONPATH=$ROOT
which ncu > $OUT/g.log 2>&1; ncu --version >> $OUT/g.log 2>&1
timeout 240 ncu --clock-control none -k regex:"_gather_to_bf16_kernel|_fused_compress_kernel" -c 2 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters \
  python3 .versus/ncu_gather.py 8,131072,256 > $OUT/ncu.txt 2> $OUT/ncu.err
echo "ncu rc=$?" >> $OUT/g.log
for v in $(ls -d $ROOT/.versus/var_* 2>/dev/null); do
  name=$(basename $v)
  (cd $v && PYTHONPATH=$v EXPLORE_CORES=40 EXPLORE_CASES="8,65536,128 8,131072,256 1,8192,256" timeout 60 python3 $ROOT/.versus/explore.py $name >> $OUT/explore_var.jsonl 2>> $OUT/explore_var.err; echo "$name rc=$?" >> $OUT/g.log)
done
EXPLORE_CORES=40 EXPLORE_CASES="8,65536,128 8,131072,256 1,8192,256" timeout 60 python3 .versus/explore.py head >> $OUT/explore_var.jsonl 2>> $OUT/explore_var.err
echo "head rc=$?" >> $OUT/g.log
cat $OUT/g.log; tail -5 $OUT/ncu.err
