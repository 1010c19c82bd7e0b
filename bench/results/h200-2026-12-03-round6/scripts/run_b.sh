#!/bin/bash
# Call B: the full comparison (gpgpu, default, fused, 2nd-placed entry's Ascend path; contiguous and shuffled), more GPU tests.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/b.log
timeout 260 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/b.log
timeout 250 python3 -m pytest -q -p no:cacheprovider tests/test_routes.py tests/test_ascend_stages.py tests/test_work_split.py -x -rs > $OUT/pytest_gpu_b.log 2>&1
echo "pytest rc=$?" >> $OUT/b.log; tail -3 $OUT/pytest_gpu_b.log >> $OUT/b.log
cat $OUT/b.log
