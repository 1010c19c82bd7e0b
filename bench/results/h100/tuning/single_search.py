"""The script behind single_search_<commit>.log (run from the repository root of the tree 4d74dab,
PYTHONPATH=.). The Ascend routes' mixed steps (more than 16 requests, more than 4096 tokens): the search in one
program (SINGLE_PROGRAM_TOKENS raised to 16384: list kernel only) against the shipped two-launch
search (count kernel, then list), alternating, twice each. Every row oracle-checked first
(bench.steps.measure); host time also as a median of 400 queued calls after 20 untimed ones.
SMOKE=1 with TRITON_INTERPRET=1: a small version on a CPU."""
import os, statistics, time
import torch
from ascend_kvc import boundaries, compress_step, step as stepmod
from ascend_kvc.workloads import mixed_step
from bench.cli import make_timer
from bench.steps import measure

SMOKE = os.environ.get("SMOKE")
DEV = "cpu" if SMOKE else "cuda"
time_fn = make_timer(DEV)
print(torch.cuda.get_device_name() if not SMOKE else "cpu", torch.__version__, flush=True)
shipped = boundaries.SINGLE_PROGRAM_TOKENS
modes = {"two-launch": (1024 if SMOKE else shipped), "one-program": (4096 if SMOKE else 16384)}
small = dict(prefill_tokens=1536, decode_tokens=4) if SMOKE else {}
cases = [mixed_step(C, device=DEV, **small) for C in (128, 512)]
if not SMOKE:
    cases.append(mixed_step(128, prefill_tokens=16320, device=DEV))

def host_median(sw, route, n=400):
    args, kw = sw.args(), sw.kwargs()
    out = args[-1].clone()
    f = lambda: compress_step(*args[:-1], out, **kw, route=route, validate=False)
    for _ in range(20): f()
    if DEV == "cuda": torch.cuda.synchronize()
    xs = []
    for _ in range(n if not SMOKE else 3):
        t = time.perf_counter(); f(); xs.append((time.perf_counter() - t) * 1e6)
    if DEV == "cuda": torch.cuda.synchronize()
    return round(statistics.median(xs), 1)

for sw in cases:
    for route in ("ascend:fused", "ascend"):
        res = {}
        for rep in range(2):
            for mode, limit in modes.items():
                boundaries.SINGLE_PROGRAM_TOKENS = limit
                stepmod.clear_step_plans()
                r = measure("mixed", sw, None, route, DEV, time_fn, 3 if SMOKE else 100)
                assert r["check"] == "ok", r
                res.setdefault(mode, []).append((round((r["step_graph_ms"] or 0) * 1e3, 1), round(r["step_ms"] * 1e3, 1),
                                                 host_median(sw, route), r["step_launches"],
                                                 round((r["indexed_graph_ms"] or 0) * 1e3, 1)))
        boundaries.SINGLE_PROGRAM_TOKENS = shipped
        print(f"{sw.name:26s} {route:13s} (graph us, eager us, host us median of 400, launches, indexed graph us)", res, flush=True)
