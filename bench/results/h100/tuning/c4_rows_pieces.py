"""Ratio-4 tiles with one window piece (no merge) against the kept two pieces, gpgpu on bench.vllm_peer's C4 decode step and prefill chunk, vLLM's
kernel timed beside each (graph replay and eager, CUDA events, L2 flushed); bytes checked first.
Its log holds two runs; the first had no `w4s2e-r16` row and timed only `base` and `w4s2e-1split` on the chunk."""
import sys
import torch
from ascend_kvc import step as stepmod
from ascend_kvc.oracle import check_cache
from bench import vllm_peer as V
from gpgpu_fallback import tuning as T

G = T.GpgpuTiles
variants = {
    "base": None,
    "w4s2e-1split": G(block_d=512, rows_per_step=8, warps=4, stages=2, programs_per_unit=8, max_splits=1, evict_first=True),
    "w4s2e-r16-1split": G(block_d=512, rows_per_step=16, warps=4, stages=2, programs_per_unit=8, max_splits=1, evict_first=True),
    "w4s2e-r16": G(block_d=512, rows_per_step=16, warps=4, stages=2, programs_per_unit=8, max_splits=16, evict_first=True),
    "w2s2e-1split": G(block_d=512, rows_per_step=8, warps=2, stages=2, programs_per_unit=8, max_splits=1, evict_first=True),
    "w8s2e-1split": G(block_d=512, rows_per_step=8, warps=8, stages=2, programs_per_unit=8, max_splits=1, evict_first=True),
}
base = T.TILES_BY_RATIO[("cuda:sm90", 4)]
peer = V.load_peer(sys.argv[1])
cases = V.build_cases(["decode", "C4"], False, "cuda")
for rnd in range(2):
    for clabel, step in cases:
        pk = step.kv_cache.clone()
        pc = V.peer_call(peer, step, pk)
        print(f"r{rnd} vllm    {clabel:24s} graph {V.graph_us(pc, 200, 20):6.1f} eager {V.event_us(pc, 200, 20):6.1f}", flush=True)
        for name, tiles in variants.items():
            if not clabel.startswith("decode") and name not in ("base", "w4s2e-1split", "w4s2e-r16-1split", "w4s2e-r16"):
                continue
            T.TILES_BY_RATIO[("cuda:sm90", 4)] = tiles or base
            stepmod.clear_step_plans()
            kv = step.kv_cache.clone()
            before = kv.clone()
            call = V.ours_call(step, kv, "gpgpu")
            call()
            torch.cuda.synchronize()
            rep = check_cache(V.checked_operator_args(step), kv, before)
            assert rep.ok, (name, clabel, rep)
            g = V.graph_us(call, 200, 20)
            e = V.event_us(call, 200, 20)
            print(f"r{rnd} {name:7s} {clabel:24s} graph {g:6.1f} eager {e:6.1f}", flush=True)
T.TILES_BY_RATIO[("cuda:sm90", 4)] = base
