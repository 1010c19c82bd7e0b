"""C=512 at 8192 tokens: gpgpu's step (token tiles) and the indexed call under tile/cap variants,
graph replay (bench's timer, L2 flushed), alternating twice; registers and spills of the step's kernel."""
import torch
from ascend_kvc import c128_256_512_compress, compress_step, step as stepmod, api
from ascend_kvc.workloads import official_step
from bench.cli import make_timer, time_graph
from gpgpu_fallback import route as R
from gpgpu_fallback.tuning import GpgpuTiles
orig_tiles, orig_cap = R.tiles_for, R.one_wave_registers
time_fn = make_timer("cuda")
def T(rows, stages=3, bd=64, w=2):
    return GpgpuTiles(block_d=bd, rows_per_step=rows, warps=w, stages=stages, programs_per_unit=8, max_splits=8, evict_first=True)
variants = {
    "default": (None, None),
    "nocap": (None, 0),
    "cap144": (None, 144),
    "cap168": (None, 168),
    "rows16": (T(16), None),
    "rows16_nocap": (T(16), 0),
    "rows16_st2": (T(16, 2), None),
    "st2": (T(32, 2), None),
}
for case in [(1, 8192, 512), (1, 8192, 256)]:
    sw, w = official_step(*case, shuffle=True, nonzero_cache=True, device="cuda")
    kw = dict(block_size=sw.block_size, compress_ratio=sw.compress_ratio, route="gpgpu", validate=False)
    step = lambda: compress_step(*sw.args(), **kw)
    idx = lambda: c128_256_512_compress(*w.args(), out=w.kv_cache, route="gpgpu", validate=False)
    res, regs = {}, {}
    for rep in range(2):
        for name, (tiles, cap) in variants.items():
            if case[2] != 512 and name not in ("default", "nocap"):
                continue
            R.tiles_for = (lambda *a: tiles) if tiles is not None else orig_tiles
            R.one_wave_registers = orig_cap if cap is None else ((lambda *a: None) if cap == 0 else (lambda *a, c=cap: c))
            for mode, fn in (("step", step), ("idx", idx)):
                if mode == "idx" and cap is not None:
                    continue
                stepmod.clear_step_plans()
                api.clear_launch_plans()
                ms = time_graph(fn, time_fn)
                res.setdefault(f"{name}/{mode}", []).append(round(ms * 1000, 1))
                if mode == "step" and rep == 0:
                    for p in stepmod._STEP_PLANS.values():
                        k = p.launcher._compiled
                        regs[name] = (p.launcher.grid[0], p.launcher.options.get("maxnreg"), k.n_regs, k.n_spills)
    R.tiles_for, R.one_wave_registers = orig_tiles, orig_cap
    print(case, res, regs, flush=True)
