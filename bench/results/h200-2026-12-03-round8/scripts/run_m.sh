#!/bin/bash
# Call M: GPU tests of the working tree, then per-kernel explore: HEAD against the working tree
# (tile-aligned runs + merge head + two outputs resolved ahead), and two ablations.
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
(export PYTHONPATH=$ROOT; timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x -rs > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?" >> $OUT/m.log; tail -1 $OUT/pytest_gpu.log >> $OUT/m.log)
export EXPLORE_CASES="1,8192,128 1,8192,256 1,8192,512 4,32768,512 8,131072,512 8,65536,128"
for t in head:$ROOT/.versus/head new:$ROOT nounit:$ROOT nopre:$ROOT/.versus/nopre new2:$ROOT head2:$ROOT/.versus/head; do
  name=${t%%:*}; dir=${t#*:}
  patch='{}'; [ $name = nounit ] && patch='{"run_rows_1": true}'
  (cd $dir && PYTHONPATH=$dir EXPLORE_PATCH="$patch" timeout 100 python3 $ROOT/.versus/explore.py $name >> $OUT/explore_m.jsonl 2>> $OUT/explore_m.err; echo "$name rc=$?" >> $OUT/m.log)
done
cat $OUT/m.log; tail -3 $OUT/explore_m.err
