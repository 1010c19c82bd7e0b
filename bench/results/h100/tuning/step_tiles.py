"""gpgpu tile sets for steps: decode steps (few outputs), the C512 8192-token step, the C4 decode.
For each case and tile set: step graph replay and indexed graph replay under the same tiles,
then the indexed call with the table's tiles. Every variant is checked against the oracle."""
import sys, torch
from ascend_kvc import c128_256_512_compress, compress_step, step as stepmod, api
from ascend_kvc.workloads import official_step, decode_step
from ascend_kvc.oracle import check_cache
from ascend_kvc.step import boundary_tokens
from bench.cli import make_timer, time_graph
from gpgpu_fallback import route as R
from gpgpu_fallback.tuning import GpgpuTiles
time_fn = make_timer("cuda")
orig_tiles = R.tiles_for
def T(d, rows, w, s, ms, ev=True): return GpgpuTiles(block_d=d, rows_per_step=rows, warps=w, stages=s, programs_per_unit=8, max_splits=ms, evict_first=ev)
DEC = [None, T(512, 16, 8, 2, 1), T(512, 8, 4, 2, 1), T(512, 32, 8, 2, 1), T(512, 16, 4, 2, 1), T(256, 16, 4, 2, 1),
       T(256, 32, 8, 2, 1), T(128, 32, 4, 3, 1), T(512, 16, 8, 3, 1, False), T(128, 32, 4, 3, 2)]
BIG = [None, T(128, 32, 4, 3, 8), T(64, 32, 4, 3, 8), T(32, 32, 1, 3, 16), T(64, 32, 2, 3, 4)]
cases = [("dec", (256, 1, 128), DEC), ("dec", (64, 8, 128), DEC), ("dec", (64, 1, 128), DEC), ("dec", (1, 1, 128), DEC[:4]),
         ("dec", (256, 8, 256), DEC[:6]), ("off", (1, 8192, 512), BIG)]
for kind, case, sets in cases:
    if kind == "off":
        sw, w = official_step(*case, shuffle=True, nonzero_cache=True, device="cuda")
    else:
        sw = decode_step(*case, device="cuda")
        w = sw.as_operator(boundary_tokens(sw.positions, sw.kv_slot_mapping, sw.compress_ratio, sw.state_slot_mapping))
    out = sw.kv_cache.clone()
    step = lambda: compress_step(*sw.args()[:-1], out, **sw.kwargs(), route="gpgpu", validate=False)
    idx = lambda: c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
    for rep in range(2):
        for t in sets:
            R.tiles_for = orig_tiles if t is None else (lambda *a, _t=t, **k: _t)
            stepmod.clear_step_plans(); api.clear_launch_plans()
            try:
                before = sw.kv_cache.clone(); o2 = before.clone()
                compress_step(*sw.args()[:-1], o2, **sw.kwargs(), route="gpgpu", validate=False); torch.cuda.synchronize()
                ok = check_cache(w.checked_args(), o2, before).ok
                o3 = before.clone(); c128_256_512_compress(*w.args(), out=o3, route="gpgpu", validate=False)
                ok2 = check_cache(w.checked_args(), o3, before).ok
                s_us = time_graph(step, time_fn) * 1000; i_us = time_graph(idx, time_fn) * 1000
                p = next(iter(stepmod._STEP_PLANS.values()))
                k = p.launcher._compiled
                info = (p.launcher.grid[0], p.launcher.constexprs.get("TOKEN_TILE"), p.launcher.constexprs.get("INLINE_T"),
                        getattr(k, "n_regs", None), getattr(k, "n_spills", None))
                print(kind, case, rep, t and (t.block_d, t.rows_per_step, t.warps, t.stages, t.max_splits, int(t.evict_first)),
                      f"step {s_us:.1f} idx {i_us:.1f} ratio {s_us / i_us:.2f}", ok, ok2, info, flush=True)
            except Exception as e:
                print(kind, case, rep, t, "ERROR", type(e).__name__, str(e)[:200], flush=True)
        R.tiles_for = orig_tiles
