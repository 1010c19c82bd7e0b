#!/bin/bash
# Call S (tree 2f534a6): the comparison with gpgpu and the 2nd-placed entry's Ascend path, five
# passes, with the machine's load and CPU clocks sampled every 5 s alongside.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/s.log
nproc >> $OUT/s.log; date -u >> $OUT/s.log
( while true; do echo "$(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) MHz $(grep MHz /proc/cpuinfo | awk '{s+=$4; n++} END {printf "%.0f", s/n}')"; sleep 5; done ) > $OUT/machine_samples.log 2>&1 &
SAMPLER=$!
timeout 420 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --passes 5 --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/s.log; date -u >> $OUT/s.log
kill $SAMPLER
top -bn1 | head -20 >> $OUT/s.log
cat $OUT/s.log; head -3 $OUT/machine_samples.log; tail -3 $OUT/machine_samples.log
