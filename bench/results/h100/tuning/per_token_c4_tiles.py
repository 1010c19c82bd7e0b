"""Tile variants of gpgpu's ratio-4 kernel on bench.vllm_peer's C4 cases (graph replay and eager,
CUDA events, L2 flushed), ours only; every variant's bytes checked against the oracle first."""
import sys
import torch
from ascend_kvc import step as stepmod
from ascend_kvc.oracle import check_cache
from bench import vllm_peer as V
from gpgpu_fallback import route as R
from gpgpu_fallback import tuning as T

label = sys.argv[1]
variants = {
    "base": None,
    "w8s2": T.GpgpuTiles(block_d=512, rows_per_step=8, warps=8, stages=2, programs_per_unit=8, max_splits=16),
    "w2s2": T.GpgpuTiles(block_d=512, rows_per_step=8, warps=2, stages=2, programs_per_unit=8, max_splits=16),
    "w4s1": T.GpgpuTiles(block_d=512, rows_per_step=8, warps=4, stages=1, programs_per_unit=8, max_splits=16),
    "w4s3": T.GpgpuTiles(block_d=512, rows_per_step=8, warps=4, stages=3, programs_per_unit=8, max_splits=16),
    "w8s1": T.GpgpuTiles(block_d=512, rows_per_step=8, warps=8, stages=1, programs_per_unit=8, max_splits=16),
    "r16w4": T.GpgpuTiles(block_d=512, rows_per_step=16, warps=4, stages=2, programs_per_unit=8, max_splits=16),
    "r16w8": T.GpgpuTiles(block_d=512, rows_per_step=16, warps=8, stages=2, programs_per_unit=8, max_splits=16),
}
base = T.TILES_BY_RATIO[("cuda:sm90", 4)]
cases = V.build_cases(["C4", "decode"], False, "cuda")
for name, tiles in variants.items():
    T.TILES_BY_RATIO[("cuda:sm90", 4)] = tiles or base
    for clabel, step in cases:
        for per_token in ((True, False) if clabel.startswith("decode") else (True,)):
            R.STEP_PER_TOKEN_PROGRAMS_PER_UNIT = R.STEP_INLINE_PROGRAMS_PER_UNIT if per_token else 0
            stepmod.clear_step_plans()
            kv = step.kv_cache.clone()
            before = kv.clone()
            call = V.ours_call(step, kv, "gpgpu")
            call()
            torch.cuda.synchronize()
            checked = V.checked_operator_args(step)
            rep = check_cache(checked, kv, before)
            assert rep.ok, (name, clabel, rep)
            g = V.graph_us(call, 200, 20)
            e = V.event_us(call, 200, 20)
            print(f"{label} {name:6s} {clabel:24s} per_token={int(per_token)} graph {g:6.1f} eager {e:6.1f}", flush=True)
T.TILES_BY_RATIO[("cuda:sm90", 4)] = base
