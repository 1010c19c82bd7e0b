#!/bin/bash
# Call U (tree: fused's split in one launch, uncommitted on 2f534a6): GPU tests; 40 programs, the
# tree before (r9base = 2f534a6) and after, twice each, alternating; the full comparison, 3 passes.
set -u
export PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/u.log
date -u >> $OUT/u.log
PYTHONPATH=$PWD timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py tests/test_gpgpu_route.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/u.log; tail -2 $OUT/pytest_gpu.log >> $OUT/u.log; date -u >> $OUT/u.log
for k in 1 2; do
  for t in base new; do
    if [ $t = base ]; then D=$PWD/.versus/r9base; else D=$PWD; fi
    (cd $D && ASCEND_KVC_VECTOR_CORES=40 PYTHONPATH=$D timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --passes 1 --json $OUT/v40_${t}_$k.json > $OUT/v40_${t}_$k.log 2>&1)
    echo "v40 $t $k rc=$?" >> $OUT/u.log
  done
done
date -u >> $OUT/u.log
PYTHONPATH=$PWD timeout 250 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --passes 3 --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/u.log; date -u >> $OUT/u.log
cat $OUT/u.log; grep "rate / best" $OUT/v40_*_1.log | grep fused
