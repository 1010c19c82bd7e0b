#!/bin/bash
# Call R (tree 1st commit of round 9: versus with passes): GPU tests, the 40-core comparison, and
# the comparison with gpgpu and the 2nd-placed entry's Ascend path, three passes.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/r.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/r.log
date -u >> $OUT/r.log
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/r.log; tail -2 $OUT/pytest_gpu.log >> $OUT/r.log; date -u >> $OUT/r.log
ASCEND_KVC_VECTOR_CORES=40 timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --passes 1 --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/r.log; date -u >> $OUT/r.log
timeout 330 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --passes 3 --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/r.log; date -u >> $OUT/r.log
cat $OUT/r.log; grep "rate / best" $OUT/versus_40.log; tail -40 $OUT/versus.log
