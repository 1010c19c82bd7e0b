#!/bin/bash
# Call K11 (s_base = tree db2473d's ascend_kvc; s_k = the working tree: several small blocks a window
# step): GPU tests of the working tree, then block sizes 1-8 for both, s_k with and without volatile rows.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/k.log; date -u >> $OUT/k.log
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/k.log
[ -n "${SKIP_TESTS:-}" ] || PYTHONPATH=$R timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/k.log; tail -1 $OUT/pytest_gpu.log >> $OUT/k.log
CASES="1,8192,512 1,8192,128 8,131072,512 8,131072,128"
(cd .versus/s_base && SWEEP_VARIANT=base PYTHONPATH=$PWD:$R timeout 150 python3 ../sweep_bs.py "$CASES" 1,2,4,8) > $OUT/k.jsonl 2> $OUT/k.err
echo "base rc=$?" >> $OUT/k.log; date -u >> $OUT/k.log
(cd .versus/s_k && SWEEP_VARIANT=k PYTHONPATH=$PWD:$R timeout 150 python3 ../sweep_bs.py "$CASES" 1,2,3,4,8) >> $OUT/k.jsonl 2>> $OUT/k.err
echo "k rc=$?" >> $OUT/k.log; date -u >> $OUT/k.log
(cd .versus/s_k && SWEEP_VARIANT=k_novol SWEEP_VOLATILE=0 PYTHONPATH=$PWD:$R timeout 120 python3 ../sweep_bs.py "$CASES" 1,2,4) >> $OUT/k.jsonl 2>> $OUT/k.err
echo "k_novol rc=$?" >> $OUT/k.log; date -u >> $OUT/k.log
cat $OUT/k.log
python3 -c "
import json
for l in open('$OUT/k.jsonl'):
    r = json.loads(l)
    print(r['variant'], r['case'], r['bs'], 'gpgpu', r['gpgpu'], 'full', r['fused@full'], r['ascend@full'], '40', r['fused@40'], r['ascend@40'], r['plan_fused@40'], r['plan_ascend@full'])
"
grep -v -i warn $OUT/k.err | tail -5
