#!/bin/bash
# Call S12b: the graph-and-growing-scratch test on the tree, then on a copy whose plan ignores the capture.
set -u
export PYTHONUNBUFFERED=1
date -u > $OUT/s12b.log
PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_stream_scratch.py tests/test_routes.py -k "graph or scratch or capture" -rs > $OUT/pytest_tree.log 2>&1
echo "tree rc=$?" >> $OUT/s12b.log; tail -1 $OUT/pytest_tree.log >> $OUT/s12b.log
(cd .versus/bug && PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_stream_scratch.py -k graph_keeps -rs) > $OUT/pytest_planted.log 2>&1
echo "planted rc=$?" >> $OUT/s12b.log; tail -1 $OUT/pytest_planted.log >> $OUT/s12b.log; date -u >> $OUT/s12b.log
cat $OUT/s12b.log; grep -E "^E |Error" $OUT/pytest_planted.log | head -8
