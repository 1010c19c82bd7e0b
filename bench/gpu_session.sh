#!/usr/bin/env bash
# Everything a GPU machine checks and measures, from a source tree (no install):
#   bench/gpu_session.sh OUTDIR [tests] [memcheck] [bench] [steps] [vllm] [formats]
#                                            (default: tests memcheck bench)
# tests:    the whole test suite compiled on the GPU (packaging and audit tests need a package
#           index and triton-ascend, so they are left to the CPU run);
# memcheck: tools/memcheck.py --small --steps (every route, every kind of bad index,
#           validate=False, calls and steps) under compute-sanitizer --tool memcheck;
# bench:    python -m bench over the official cases, both layouts, into OUTDIR/report;
# steps:    python -m bench.steps (engine-shaped steps against the indexed call);
# vllm:     python -m bench.vllm_peer, vLLM's compressor beside gpgpu and fused (its file kept
#           under .peers/vllm/, bench/peers.md);
# formats:  python -m bench --kv-format F for F in int8, fp8_e4m3 and bf16, on the smallest and
#           the largest official case of each C and the C4 chunk, shuffled, the routes that write F.
# ASCEND_KVC_COMMIT names the commit where the tree travels without .git.
set -uo pipefail
out=${1:?usage: bench/gpu_session.sh OUTDIR [tests] [memcheck] [bench] [steps] [vllm] [formats]}
shift
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
status=0
for part in ${@:-tests memcheck bench}; do
  case $part in
    tests)
      # pytest-xdist, where installed: GPU_TEST_WORKERS processes share the one GPU (default 8)
      workers=$(python3 -c "import xdist" 2>/dev/null && echo "-n ${GPU_TEST_WORKERS:-8}")
      python3 -m pytest -q -p no:cacheprovider $workers tests --ignore=tests/test_install.py -m "not audit" \
        -rfEs --tb=short 2>&1 | tee "$out/pytest_gpu.log" | tail -60 || status=1 ;;
    memcheck)
      compute-sanitizer --tool memcheck --error-exitcode 1 python3 tools/memcheck.py --small --steps \
        > "$out/memcheck.log" 2>&1 || status=1
      tail -25 "$out/memcheck.log" ;;
    bench)
      python3 -m bench --no-progress --kernels per-ratio --report "$out/report" \
        2>&1 | tee "$out/bench.log" | tail -60 || status=1 ;;
    steps)
      python3 -m bench.steps --json "$out/steps.json" 2>&1 | tee "$out/steps.log" | tail -40 || status=1 ;;
    vllm)
      python3 -m bench.vllm_peer .peers/vllm/fused_compress_quant_cache.py --routes auto,ascend:fused \
        --json "$out/vllm_peer.json" 2>&1 | tee "$out/vllm_peer.log" | tail -40 || status=1 ;;
    formats)
      for f in int8 fp8_e4m3 bf16; do
        python3 -m bench --no-progress --kernels per-ratio --shuffle --kv-format $f --routes gpgpu,ascend,ascend:fused \
          --cases 1,8192,128 8,131072,128 1,8192,256 8,131072,256 1,8192,512 8,131072,512 C4 \
          --no-report --json "$out/formats_$f.json" 2>&1 | tee -a "$out/formats.log" | tail -30 || status=1
      done ;;
    *) echo "unknown part: $part" >&2; exit 2 ;;
  esac
done
exit $status
