#!/bin/bash
# Call W: the one-launch fused split at 40 programs: base (2f534a6), as committed in f0ff3ad
# (merge inside the piece loop), without arrival and merge, and with the merges after the piece loop.
set -u
export PYTHONUNBUFFERED=1 ASCEND_KVC_VECTOR_CORES=40
R=$PWD
(cd $R/.versus/r9base && PYTHONPATH=$PWD timeout 80 python3 diag.py base) > $OUT/w.log 2>&1
(cd $R/.versus/diag && PYTHONPATH=$PWD timeout 80 python3 diag.py onelaunch) >> $OUT/w.log 2>&1
(cd $R/.versus/diag && DIAG_NOMERGE=1 PYTHONPATH=$PWD timeout 80 python3 diag.py nomerge) >> $OUT/w.log 2>&1
(cd $R/.versus/diag && DIAG_AFTER=1 PYTHONPATH=$PWD timeout 80 python3 diag.py after) >> $OUT/w.log 2>&1
unset ASCEND_KVC_VECTOR_CORES
(cd $R/.versus/r9base && PYTHONPATH=$PWD timeout 80 python3 diag.py base_full) >> $OUT/w.log 2>&1
(cd $R/.versus/diag && DIAG_AFTER=1 PYTHONPATH=$PWD timeout 80 python3 diag.py after_full) >> $OUT/w.log 2>&1
grep -v Warning $OUT/w.log
