#!/bin/bash
set -u
ROOT=$(pwd)
export PYTHONPATH=$ROOT
LOG=$OUT/explore2.jsonl
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" > $OUT/misc.log
timeout 80 python3 .versus/hostparts.py >> $OUT/misc.log 2>&1
SUB='1,8192,128 1,8192,256 1,8192,512 4,32768,128 4,32768,256 8,65536,128 8,65536,256 8,65536,512 8,131072,128 8,131072,256 8,131072,512'
run() { # name patch cores cases timeout
  EXPLORE_CASES="$4" EXPLORE_CORES=$3 EXPLORE_PATCH="$2" timeout $5 python3 .versus/explore.py $1 >> $LOG 2>> $OUT/misc.log
}
run v0 '{}' full,40 "$SUB" 150
run aheadpiece '{"ahead_piece": true}' full,40 "1,8192,128 1,8192,256 1,8192,512 8,131072,512 4,32768,256" 70
run sm1 '{"split_per_sm": 1}' full "$SUB" 70
run sm2 '{"split_per_sm": 2}' full "$SUB" 70
run rt16 '{"piece_rt": 16384}' 40 "1,8192,512 8,131072,512" 40
echo done >> $OUT/misc.log
