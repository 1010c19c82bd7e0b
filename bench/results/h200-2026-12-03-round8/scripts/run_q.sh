#!/bin/bash
# Call Q (tree after 3e4d902: piece look-ahead): GPU tests, the 40-core comparison twice, and the
# comparison with gpgpu and the 2nd-placed entry's Ascend path.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/q.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/q.log
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/q.log; tail -2 $OUT/pytest_gpu.log >> $OUT/q.log
ASCEND_KVC_VECTOR_CORES=40 timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/q.log
timeout 200 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/q.log
ASCEND_KVC_VECTOR_CORES=40 timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40b.json > $OUT/versus_40b.log 2>&1
echo "versus_40b rc=$?" >> $OUT/q.log
cat $OUT/q.log; grep "rate / best" $OUT/versus_40.log $OUT/versus_40b.log
