#!/bin/bash
# Call V: why the one-launch fused split (f0ff3ad) ran slower at 40 programs. Graph replay of
# ascend:fused, 40 programs, per variant: base (2f534a6), the one-launch kernel, without its
# arrival/merge, with maxnreg=255, with 8 warps.
set -u
export PYTHONUNBUFFERED=1 ASCEND_KVC_VECTOR_CORES=40
R=$PWD
(cd $R/.versus/r9base && PYTHONPATH=$PWD timeout 80 python3 diag.py base) > $OUT/v.log 2>&1
(cd $R/.versus/diag && PYTHONPATH=$PWD timeout 80 python3 diag.py onelaunch) >> $OUT/v.log 2>&1
(cd $R/.versus/diag && DIAG_NOMERGE=1 PYTHONPATH=$PWD timeout 80 python3 diag.py nomerge) >> $OUT/v.log 2>&1
(cd $R/.versus/diag && DIAG_MAXNREG=255 PYTHONPATH=$PWD timeout 80 python3 diag.py maxnreg255) >> $OUT/v.log 2>&1
(cd $R/.versus/diag && DIAG_WARPS=8 PYTHONPATH=$PWD timeout 80 python3 diag.py warps8) >> $OUT/v.log 2>&1
cat $OUT/v.log | grep -v Warning
