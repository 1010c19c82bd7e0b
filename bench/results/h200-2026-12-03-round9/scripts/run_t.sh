#!/bin/bash
# Call T (tree 2f534a6): does pinning the benchmark to one CPU steady the host times? The 8192-token
# cases, five passes, unpinned then pinned (taskset), then unpinned again.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node|MHz" > $OUT/t.log
for label in free pin1 free2 pin2; do
  case $label in pin1) P="taskset -c 5";; pin2) P="taskset -c 5,6";; *) P="";; esac
  date -u >> $OUT/t.log
  $P timeout 120 python3 -m bench.versus --routes gpgpu,ascend,ascend:fused --tokens 8192 --passes 5 --json $OUT/v_$label.json > $OUT/v_$label.log 2>&1
  echo "$label rc=$?" >> $OUT/t.log
done
date -u >> $OUT/t.log
cat $OUT/t.log
