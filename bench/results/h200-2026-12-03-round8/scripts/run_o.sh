#!/bin/bash
# Call O (tree 3e4d902): GPU tests, the 40-core comparison, and per-kernel explore of the tree
# against the same tree with the piece gather's table lookups one block ahead.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/o.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/o.log
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/o.log; tail -2 $OUT/pytest_gpu.log >> $OUT/o.log
ASCEND_KVC_VECTOR_CORES=40 timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/o.log
export EXPLORE_CASES="1,8192,128 1,8192,256 1,8192,512 4,32768,512 8,131072,512"
for v in cur ahead cur2 ahead2; do
  patch='{}'; case $v in ahead*) patch='{"ahead_piece": true}';; esac
  EXPLORE_PATCH="$patch" timeout 80 python3 .versus/explore.py $v >> $OUT/explore_o.jsonl 2>> $OUT/explore_o.err
  echo "$v rc=$?" >> $OUT/o.log
done
cat $OUT/o.log; grep "rate / best" $OUT/versus_40.log; tail -2 $OUT/explore_o.err
