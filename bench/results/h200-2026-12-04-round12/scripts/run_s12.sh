#!/bin/bash
# Call S12 (tree: 860335a + NPU-aware stream scratch): GPU tests of the plans, streams and graphs;
# host time of the planned routes before (860335a, in .versus/base) and after.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/s.log
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/s.log
date -u >> $OUT/s.log
PYTHONPATH=$PWD timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_stream_scratch.py tests/test_api_fastpath.py \
  tests/test_split_window.py tests/test_ascend_lean.py tests/test_gpgpu_route.py tests/test_ops.py tests/test_golden.py -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/s.log; tail -1 $OUT/pytest_gpu.log >> $OUT/s.log; date -u >> $OUT/s.log
for pass in 1 2; do
  for tree in base new; do
    if [ $tree = base ]; then P=$PWD/.versus/base; else P=$PWD; fi
    for route in ascend ascend:fused; do
      (cd $P && PYTHONPATH=$P timeout 60 python3 -m bench.host_overhead --cases 1,8192,512 8,131072,128 --route $route 2>&1 | sed "s/^/pass$pass $tree /") >> $OUT/host.log
    done
  done
done
date -u >> $OUT/s.log
cat $OUT/s.log; grep -E "passed|failed|error" $OUT/pytest_gpu.log | tail -3; cat $OUT/host.log
