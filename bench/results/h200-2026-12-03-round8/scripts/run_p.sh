#!/bin/bash
# Call P (tree 3e4d902): the comparison with gpgpu and the 2nd-placed entry's Ascend path, then the
# 40-core comparison again.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/p.log
timeout 300 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/p.log
ASCEND_KVC_VECTOR_CORES=40 timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/p.log
cat $OUT/p.log; grep "rate / best" $OUT/versus_40.log
