#!/bin/bash
# Call L: GPU tests and the 40-core comparison on the tree with the shared per-output helper.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 110 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/l.log; tail -1 $OUT/pytest_gpu.log >> $OUT/l.log
ASCEND_KVC_VECTOR_CORES=40 timeout 90 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/l.log
cat $OUT/l.log; grep "rate / best" $OUT/versus_40.log
