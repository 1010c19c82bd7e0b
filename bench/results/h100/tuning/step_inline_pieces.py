"""gpgpu decode steps searched inside the kernel (64 and 256 tokens) at C=128/256/512 with their
window pieces forced to 1, 2, 4 against the plan; R1 (per-token grid) untouched. Oracle-checked rows."""
import torch
from ascend_kvc import step as stepmod
from ascend_kvc.workloads import decode_step
from bench.cli import make_timer
from bench.steps import measure
from gpgpu_fallback import route as R

orig = R._step_splits
time_fn = make_timer("cuda")
for rnd in range(2):
    for C in (128, 256, 512):
        for nr, nb in ((64, 1), (256, 1), (256, 8)):
            sw = decode_step(nr, nb, C, device="cuda")
            for forced in (None, 1, 2, 4):
                R._step_splits = (lambda *a, f=forced: f if a[1] >= 64 else orig(*a)) if forced else orig
                stepmod.clear_step_plans()
                r = measure("decode", sw, None, "gpgpu", "cuda", time_fn, 10)
                assert r["check"] == "ok", r
                print(f"r{rnd} {sw.name:22s} splits {forced or 'plan':4} step {r['step_graph_ms']*1e3:6.1f} "
                      f"indexed {r['indexed_graph_ms']*1e3:6.1f} x {r['x_indexed']:.2f}", flush=True)
R._step_splits = orig
