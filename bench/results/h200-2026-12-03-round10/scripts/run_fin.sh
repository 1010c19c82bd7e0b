#!/bin/bash
# Final tree: the GPU tests of the launch plans, the split, the planner, the lean default and golden bytes.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/fin.log
date -u >> $OUT/fin.log
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py tests/test_work_split.py -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/fin.log; tail -2 $OUT/pytest_gpu.log >> $OUT/fin.log; date -u >> $OUT/fin.log
cat $OUT/fin.log
