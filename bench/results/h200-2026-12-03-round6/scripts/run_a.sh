#!/bin/bash
# Call A: GPU tests of the changed code, 40-core A/B (base a546316 vs this tree), host A/B.
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/a.log
PYTHONPATH=$ROOT timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/a.log; tail -3 $OUT/pytest_gpu.log >> $OUT/a.log
PYTHONPATH=$ROOT ASCEND_KVC_VECTOR_CORES=40 timeout 110 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/a.log
(cd .versus/base && PYTHONPATH=$PWD ASCEND_KVC_VECTOR_CORES=40 timeout 110 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40_base.json > $OUT/versus_40_base.log 2>&1; echo "versus_40_base rc=$?" >> $OUT/a.log)
PYTHONPATH=$ROOT timeout 120 python3 .versus/host_ab.py > $OUT/host_ab.jsonl 2>&1
echo "host_ab rc=$?" >> $OUT/a.log
cat $OUT/a.log
