#!/bin/bash
# Call S12d (tree: gpgpu route on stream_state): the GPU tests of the routes, plans, streams and graphs.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
date -u > $OUT/s12d.log
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_stream_scratch.py tests/test_gpgpu_route.py \
  tests/test_routes.py tests/test_api_fastpath.py tests/test_ascend_lean.py tests/test_ops.py tests/test_multi_gpu.py -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/s12d.log; tail -1 $OUT/pytest_gpu.log >> $OUT/s12d.log; date -u >> $OUT/s12d.log
cat $OUT/s12d.log; grep SKIPPED $OUT/pytest_gpu.log | head
