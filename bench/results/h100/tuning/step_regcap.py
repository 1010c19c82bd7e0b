"""The script behind step_regcap_<commit>.log (run from the repository root, PYTHONPATH=.): gpgpu's
step on the 12 official cases with the token tiles' register cap (as planned), without it
(one_wave_registers patched to None), and the call with the indices given; graph replay (bench's
timer, L2 flushed), twice each, alternating; the compiled kernel's registers, spills and cap. It
checks no bytes: the same kernels pass the oracle in the GPU suite and in bench.steps of the same
call."""
import torch
from ascend_kvc import c128_256_512_compress, compress_step, step as stepmod
from ascend_kvc.workloads import OFFICIAL_CASES, official_step
from bench.cli import make_timer, time_graph
from gpgpu_fallback import route as R

capped = R.one_wave_registers
time_fn = make_timer("cuda")
print(torch.cuda.get_device_name(), torch.__version__, flush=True)
for case in OFFICIAL_CASES:
    sw, w = official_step(*case, shuffle=True, nonzero_cache=True, device="cuda")
    kw = dict(block_size=sw.block_size, compress_ratio=sw.compress_ratio, route="gpgpu", validate=False)
    step = lambda: compress_step(*sw.args(), **kw)
    idx = lambda: c128_256_512_compress(*w.args(), out=w.kv_cache, route="gpgpu", validate=False)
    res, regs = {}, {}
    for rep in range(2):
        for mode in ("capped", "uncapped", "indexed"):
            R.one_wave_registers = capped if mode == "capped" else (lambda *a: None)
            stepmod.clear_step_plans()
            ms = time_graph(idx if mode == "indexed" else step, time_fn)
            res.setdefault(mode, []).append(round(ms * 1000, 1))
            if mode != "indexed" and rep == 0:
                plans = list(stepmod._STEP_PLANS.values())
                for p in plans:
                    L = getattr(p, "launcher", None)
                    k = getattr(L, "_compiled", None)
                    regs[mode] = (getattr(L, "grid", None), getattr(L, "options", {}).get("maxnreg"),
                                  getattr(k, "n_regs", None), getattr(k, "n_spills", None))
    R.one_wave_registers = capped
    print(case, res, regs, flush=True)
