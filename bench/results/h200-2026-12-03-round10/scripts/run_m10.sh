#!/bin/bash
# Call M10 (tree 1a99254 = m_base; m_nb: the merge reads its states alongside the head; m_pair: m_nb
# and two outputs a merge step): GPU tests of m_pair, per-kernel and graph times at 40 programs and full grid.
set -u
export PYTHONUNBUFFERED=1
R=$PWD
PYTHONPATH=$R timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_split_window.py tests/test_ascend_lean.py -x > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?"; tail -1 $OUT/pytest_gpu.log
for v in m_base m_nb m_pair; do
  (cd $R/.versus/$v && EXPLORE_CORES=40 EXPLORE_CASES="1,8192,128 1,8192,512 4,32768,128 8,131072,128 8,131072,512" PYTHONPATH=$PWD timeout 110 python3 explore.py $v) >> $OUT/m.log 2>&1
  (cd $R/.versus/$v && EXPLORE_CORES=full EXPLORE_CASES="1,8192,128 8,131072,512" PYTHONPATH=$PWD timeout 50 python3 explore.py $v) >> $OUT/m.log 2>&1
done
grep -v Warning $OUT/m.log | python3 -c "
import sys, json
for l in sys.stdin:
    if not l.startswith('{'): print(l.rstrip()[:200]); continue
    r = json.loads(l); k = r['kernels']
    print(r['variant'], r['case'], r['cores'], r['route'][-5:], r['ok'], r['graph_us'], {n[:14]: v for n, v in k.items()})
"
