#!/bin/bash
# Call F11 (tree ee2c173, kernels as eaaafce): GPU tests, the 40-program rates, and the comparison
# with gpgpu and the 2nd-placed entry's Ascend path, five passes, the machine's load sampled alongside.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
V=.versus/task02_c128_256_512_compress.py
sha256sum $V > $OUT/f.log
nvidia-smi --query-gpu=name,driver_version --format=csv >> $OUT/f.log
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/f.log
nproc >> $OUT/f.log; date -u >> $OUT/f.log
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/test_api_fastpath.py tests/test_split_window.py tests/test_ascend_lean.py tests/test_golden.py tests/test_work_split.py -x -rs > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$?" >> $OUT/f.log; tail -1 $OUT/pytest_gpu.log >> $OUT/f.log; date -u >> $OUT/f.log
ASCEND_KVC_VECTOR_CORES=40 timeout 100 python3 -m bench.versus --routes ascend,ascend:fused --passes 1 --json $OUT/versus_40.json > $OUT/versus_40.log 2>&1
echo "versus_40 rc=$?" >> $OUT/f.log; date -u >> $OUT/f.log
( while true; do echo "$(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg) MHz $(grep MHz /proc/cpuinfo | awk '{s+=$4; n++} END {printf "%.0f", s/n}')"; sleep 5; done ) > $OUT/machine_samples.log 2>&1 &
SAMPLER=$!
timeout 330 python3 -m bench.versus $V --name rank2 --no-default --variant-tag ascend="npu:0 npu ascend910b" \
  --routes gpgpu,ascend,ascend:fused --shuffled --passes 5 --json $OUT/versus.json > $OUT/versus.log 2>&1
echo "versus rc=$?" >> $OUT/f.log; date -u >> $OUT/f.log
kill $SAMPLER
cat $OUT/f.log; grep "rate / best" -A3 $OUT/versus_40.log | head -20; tail -45 $OUT/versus.log
