"""Graph replay of compress_step on the Ascend routes, this tree's kernels (run from the tree's
root with PYTHONPATH set to it); every row checked against the oracle (bench.steps.measure)."""
import sys
import torch
from ascend_kvc.workloads import mixed_step, official_step
from bench.cli import make_timer
from bench.steps import measure
from ascend_kvc import step as stepmod

label = sys.argv[1]
time_fn = make_timer("cuda")
cases = [("mixed", mixed_step(C, device="cuda"), None) for C in (128, 512)]
for case in ((1, 8192, 128), (1, 8192, 256), (1, 8192, 512), (4, 32768, 128)):
    sw, w = official_step(*case, shuffle=True, nonzero_cache=True, device="cuda")
    cases.append(("official", sw, w.boundary_token_indices))
for kind, sw, expected in cases:
    for route in ("ascend", "ascend:fused"):
        stepmod.clear_step_plans()
        r = measure(kind, sw, expected, route, "cuda", time_fn, 100)
        assert r["check"] == "ok", r
        print(f"{label:6s} {sw.name:24s} {route:13s} step graph {r['step_graph_ms']*1e3:6.1f} eager {r['step_ms']*1e3:6.1f} "
              f"host {r['step_host_us']:5.0f} launches {r['step_launches']:.0f} | indexed graph {r['indexed_graph_ms']*1e3:6.1f} "
              f"x {r['x_indexed']:.2f}", flush=True)
