#!/bin/bash
# Call Z (tree: one program per core splits every call): GPU tests, 40 and 48 programs, and the
# comparison with gpgpu and the 2nd-placed entry's Ascend path, three passes.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/z.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $OUT/z.log
date -u >> $OUT/z.log
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py tests/test_work_split.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/z.log; tail -2 $OUT/pytest_gpu.log >> $OUT/z.log; date -u >> $OUT/z.log
for k in 40 48; do
ASCEND_KVC_VECTOR_CORES=$k timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --passes 1 --json $OUT/versus_$k.json > $OUT/versus_$k.log 2>&1
echo "versus_$k rc=$?" >> $OUT/z.log; date -u >> $OUT/z.log
done
timeout 300 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --passes 3 --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/z.log; date -u >> $OUT/z.log
cat $OUT/z.log; grep "rate / best" $OUT/versus_40.log $OUT/versus_48.log; tail -42 $OUT/versus.log
