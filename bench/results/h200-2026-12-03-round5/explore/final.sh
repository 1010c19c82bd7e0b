#!/bin/bash
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/final.log
timeout 250 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/final.log
ASCEND_KVC_VECTOR_CORES=40 timeout 130 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/final.log
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_split_window.py tests/test_ascend_lean.py tests/test_api_fastpath.py tests/test_ascend_stages.py tests/test_golden.py tests/test_routes.py -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/final.log
tail -3 $OUT/pytest_gpu.log >> $OUT/final.log
