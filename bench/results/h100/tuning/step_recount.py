"""The script behind step_recount_<commit>.log (run from the repository root of the tree bab2cf2,
whose boundaries.RECOUNT_TOKENS was reverted after this run, PYTHONPATH=.; SMOKE=1 with
TRITON_INTERPRET=1 runs a small version on a CPU): the
steps of 4097-16384 tokens with the one-launch search (each list program recounts the chunks
before its own, boundaries.RECOUNT_TOKENS as shipped) and with the two-launch search (count kernel,
then list; RECOUNT_TOKENS patched to 0), alternating, twice each. Every row is checked against the
oracle before it is timed (bench.steps.measure)."""
import sys
import torch
from ascend_kvc import boundaries, step as stepmod
from ascend_kvc.workloads import mixed_step, official_step
from bench.cli import make_timer
from bench.steps import measure

import os
SMOKE = os.environ.get("SMOKE")
DEV = "cpu" if SMOKE else "cuda"
time_fn = make_timer(DEV)
print(torch.cuda.get_device_name() if not SMOKE else "cpu", torch.__version__, "RECOUNT_TOKENS", boundaries.RECOUNT_TOKENS,
      "COUNT_T", boundaries.COUNT_T, flush=True)
shipped = boundaries.RECOUNT_TOKENS
small = dict(prefill_tokens=1536, decode_tokens=4) if SMOKE else {}
if SMOKE:
    boundaries.SINGLE_PROGRAM_TOKENS = 1024
cases = [("mixed", mixed_step(C, device=DEV, **small), None, ("gpgpu", "ascend", "ascend:fused")) for C in (128, 512)]
if not SMOKE:  # the largest step searched in one launch: 16384 tokens
    cases.append(("mixed", mixed_step(128, prefill_tokens=16320, device=DEV), None, ("gpgpu", "ascend:fused")))
for case in (() if SMOKE else ((1, 8192, 128), (1, 8192, 256), (1, 8192, 512))):
    sw, w = official_step(*case, shuffle=True, nonzero_cache=True, device=DEV)
    cases.append(("official", sw, w.boundary_token_indices, ("ascend", "ascend:fused")))
for kind, sw, expected, routes in cases:
    for route in routes:
        res = {}
        for rep in range(2):
            for mode in ("recount", "count-kernel"):
                boundaries.RECOUNT_TOKENS = shipped if mode == "recount" else 0
                stepmod.clear_step_plans()
                r = measure(kind, sw, expected, route, DEV, time_fn, 100)
                assert r["check"] == "ok", r
                res.setdefault(mode, []).append((round((r["step_graph_ms"] or 0) * 1e3, 1), round(r["step_ms"] * 1e3, 1),
                                                 round(r["step_host_us"]), r["step_launches"],
                                                 round((r["indexed_graph_ms"] or 0) * 1e3, 1)))
        boundaries.RECOUNT_TOKENS = shipped
        print(f"{sw.name:24s} {route:13s} (graph us, eager us, host us, launches, indexed graph us)", res, flush=True)
