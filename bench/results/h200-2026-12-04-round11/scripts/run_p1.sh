#!/bin/bash
# Call P1 (tree eaaafce = p_base; p_pre1: the piece gather resolves the next piece before its rows;
# p_pre2: index reads two pieces ahead = the working tree): GPU tests of the working tree, then
# per-kernel and graph times at 40 programs and on the full grid, variants interleaved.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/p1.log; date -u >> $OUT/p1.log
PYTHONPATH=$R timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_split_window.py tests/test_ascend_lean.py tests/test_api_fastpath.py -x > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/p1.log; tail -1 $OUT/pytest_gpu.log >> $OUT/p1.log
for pass in 1; do
for v in p_base p_pre1 p_pre2; do
  (cd $R/.versus/$v && EXPLORE_CORES=40 EXPLORE_CASES="1,8192,128 1,8192,256 1,8192,512 8,131072,128 8,131072,512" PYTHONPATH=$PWD timeout 90 python3 explore.py $v) >> $OUT/m.log 2>&1
  (cd $R/.versus/$v && EXPLORE_CORES=full EXPLORE_CASES="1,8192,128 8,131072,512" PYTHONPATH=$PWD timeout 40 python3 explore.py $v) >> $OUT/m.log 2>&1
done
done
date -u >> $OUT/p1.log
cat $OUT/p1.log
grep -v Warning $OUT/m.log | python3 -c "
import sys, json
for l in sys.stdin:
    if not l.startswith('{'): print(l.rstrip()[:200]); continue
    r = json.loads(l); k = r['kernels']
    print(r['variant'], r['case'], r['cores'], r['route'][-5:], r['ok'], r['graph_us'], {n[:14]: v for n, v in k.items()})
"
