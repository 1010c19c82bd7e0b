#!/bin/bash
# usage: run_explore.sh ; writes $OUT/explore_*.jsonl
set -u
ROOT=$(pwd)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a $OUT/gpu.txt
mkvar() {  # name, python patch
  rm -rf /tmp/var_$1; mkdir -p /tmp/var_$1; cp -r $ROOT/ascend_kvc /tmp/var_$1/
  (cd /tmp/var_$1 && python3 -c "$2")
}
mkvar prefetch '
p="ascend_kvc/gather_block.py"; s=open(p).read()
old="""        for col in range(first_col + 1, last_col):
            blk, bad = _lookup_block(table_row, col, bt_s1, num_blocks)  # one lookup per block
            n_bad += bad"""
new="""        nxt, nxt_bad = _lookup_block(table_row, tl.minimum(first_col + 1, last_col), bt_s1, num_blocks)
        for col in range(first_col + 1, last_col):
            blk, bad = nxt, nxt_bad
            nxt, nxt_bad = _lookup_block(table_row, col + 1, bt_s1, num_blocks)
            n_bad += bad"""
assert old in s; open(p,"w").write(s.replace(old,new))'
mkvar rt8 '
p="ascend_kvc/stages.py"; s=open(p).read()
old="ROW_TILE_BYTES = 16 * 1024"; assert old in s; open(p,"w").write(s.replace(old,"ROW_TILE_BYTES = 32 * 1024"))'
export PYTHONPATH=$ROOT
export EXPLORE_SUB='1,8192,128 1,8192,256 1,8192,512 8,65536,128 8,131072,128 8,131072,256 8,131072,512 4,32768,256'
timeout 90 python3 .versus/hostparts.py > $OUT/hostparts.txt 2>&1
EXPLORE_HOST=1 timeout 190 python3 .versus/explore.py base > $OUT/explore_base.jsonl 2> $OUT/explore_base.err
EXPLORE_CASES=$EXPLORE_SUB EXPLORE_OPTS='{"num_warps": 8}' timeout 95 python3 .versus/explore.py nw8 > $OUT/explore_nw8.jsonl 2> $OUT/explore_nw8.err
for v in prefetch rt8; do
  EXPLORE_CASES=$EXPLORE_SUB PYTHONPATH=/tmp/var_$v:$ROOT timeout 95 python3 .versus/explore.py $v > $OUT/explore_$v.jsonl 2> $OUT/explore_$v.err
done
tail -3 $OUT/*.err
