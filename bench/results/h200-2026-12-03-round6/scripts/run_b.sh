#!/bin/bash
# Call B (final): GPU tests, 40-core run, the full comparison with the 2nd-placed entry's Ascend path.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/b.log
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/b.log; tail -2 $OUT/pytest_gpu.log >> $OUT/b.log
ASCEND_KVC_VECTOR_CORES=40 timeout 110 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/b.log
timeout 265 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/b.log
cat $OUT/b.log
