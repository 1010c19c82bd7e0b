"""Call Y: where splitting calls with at least as many outputs as cores starts to pay.
8 requests, n outputs (n = 40 .. 640), C = 128/256/512, at 40 programs: unsplit (BUSY_TARGET 0.95,
today's planner) against split (BUSY_TARGET 1.01). Then the full grid on the official cases that
run unsplit there. Graph replay, do_bench (L2 zeroed); every run checked against the oracle first."""
import json, os, sys
import torch, triton.testing
from ascend_kvc import c128_256_512_compress, api
from ascend_kvc.oracle import check_cache, compute_truth
from ascend_kvc.validation import check_metadata
from ascend_kvc.workloads import make_workload
import ascend_kvc.stages.work_split as ws
import ascend_kvc.stages.plan as plan_mod
_orig = plan_mod.plan_split
FORCE = [False]
def _plan(n, C, cores, min_rows=ws.MIN_PIECE_ROWS, unit=1):
    if not FORCE[0]:
        return _orig(n, C, cores, min_rows, unit)
    return ws.WorkSplit(n, C, cores, min(cores, max(1, n * C // max(min_rows, unit))), True, unit)
plan_mod.plan_split = _plan


def graph_us(call):
    call()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    return round(1000 * triton.testing.do_bench(g.replay, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])[0], 2)


def run(cases, cores):
    if cores:
        os.environ["ASCEND_KVC_VECTOR_CORES"] = str(cores)
    else:
        os.environ.pop("ASCEND_KVC_VECTOR_CORES", None)
    for case in cases:
        w = make_workload(*case, device="cuda")
        a = w.args()
        ca = check_metadata(*a, None)
        truth = compute_truth(ca)
        for route in ("ascend:fused", "ascend"):
            row = dict(case=w.name, outputs=w.num_outputs, cores=cores or "full", route=route)
            for bt in (False, True):
                FORCE[0] = bt
                api.clear_launch_plans()
                out = torch.zeros_like(w.kv_cache)
                c128_256_512_compress(*a, out=out, route=route, validate=True)
                torch.cuda.synchronize()
                ok = bool(check_cache(ca, out, torch.zeros_like(w.kv_cache), truth).ok)
                p = next(v for k, v in api._PLANS.items() if k[0] == route)
                tag = "split" if p.split.split else "unsplit"
                row[f"{'forced' if bt else 'planner'}_{tag}"] = graph_us(lambda: c128_256_512_compress(*a, out=out, route=route, validate=False)) if ok else f"WRONG"
            print(json.dumps(row), flush=True)
        del w, a, ca, truth
        torch.cuda.empty_cache()


if sys.argv[1] == "sweep":
    run([(8, n * C, C) for C in (128, 256, 512) for n in (40, 80, 160, 320, 640)], 40)
else:
    run([(8, 65536, 128), (8, 131072, 128), (8, 131072, 256)], None)
