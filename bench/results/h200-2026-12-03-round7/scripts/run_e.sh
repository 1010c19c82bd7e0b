#!/bin/bash
# Call E (final tree): GPU tests, per-kernel times, 40-core run, full comparison with gpgpu and the 2nd-placed entry.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/e.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/e.log
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/e.log; tail -2 $OUT/pytest_gpu.log >> $OUT/e.log
timeout 70 python3 .versus/explore.py final > $OUT/explore_final.jsonl 2> $OUT/explore_final.err
echo "explore rc=$?" >> $OUT/e.log
ASCEND_KVC_VECTOR_CORES=40 timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/e.log
timeout 255 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/e.log
cat $OUT/e.log
