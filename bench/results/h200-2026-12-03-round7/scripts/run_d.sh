#!/bin/bash
# Call D (exploration): per-kernel device time and graph replay of the default and fused on the 12
# official cases, full grid and 40 programs: e433ea6 (base2), this tree with plain row loads
# (novol), this tree as planned (cur: volatile row loads on CUDA).
set -u
export PYTHONUNBUFFERED=1
ROOT=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/d.log
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/d.log
(cd $ROOT && PYTHONPATH=$ROOT timeout 175 python3 .versus/explore.py cur > $OUT/explore_cur.jsonl 2> $OUT/explore_cur.err; echo "cur rc=$?" >> $OUT/d.log)
(cd $ROOT && PYTHONPATH=$ROOT EXPLORE_PATCH='{"volatile": {"unsplit": false, "piece": false}}' timeout 175 python3 .versus/explore.py novol > $OUT/explore_novol.jsonl 2> $OUT/explore_novol.err; echo "novol rc=$?" >> $OUT/d.log)
(cd $ROOT/.versus/base2 && PYTHONPATH=$ROOT/.versus/base2 timeout 175 python3 $ROOT/.versus/explore.py base2 > $OUT/explore_base2.jsonl 2> $OUT/explore_base2.err; echo "base2 rc=$?" >> $OUT/d.log)
cat $OUT/d.log
tail -2 $OUT/*.err
