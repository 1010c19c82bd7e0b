"""Exploration: per-kernel device time, graph time, host time of the Ascend planned rungs."""
import json, os, sys, time, statistics, warnings
import torch, triton
import ascend_kvc
from ascend_kvc import c128_256_512_compress, api
from ascend_kvc.oracle import check_cache, compute_truth
from ascend_kvc.workloads import OFFICIAL_CASES, make_workload
import ascend_kvc.stages.plan as plan_mod

variant = sys.argv[1]
opts = json.loads(os.environ.get("EXPLORE_OPTS", "{}"))
import ascend_kvc.stages as stages_mod, ascend_kvc.device as device_mod
patch = json.loads(os.environ.get("EXPLORE_PATCH", "{}"))
if "piece_rt" in patch: stages_mod.PIECE_ROW_TILE_BYTES = patch["piece_rt"]
if "ahead_piece" in patch: stages_mod.LOOKUP_AHEAD["piece"] = patch["ahead_piece"]
if "ahead_unsplit" in patch: stages_mod.LOOKUP_AHEAD["unsplit"] = patch["ahead_unsplit"]
if "volatile" in patch: stages_mod.VOLATILE_ROWS_ON_CUDA.update(patch["volatile"])
if patch.get("run_rows_1"):  # runs of rows, not of whole tiles (the tree before tile-aligned runs)
    _plan_split, _split_specs = plan_mod.plan_split, stages_mod._split_specs
    plan_mod.plan_split = lambda n, C, cores, min_rows, unit=1: _plan_split(n, C, cores, min_rows, 1)
    def _specs_rows(*a, **k):
        specs = _split_specs(*a, **k)
        for s_ in specs: s_.constexprs["RUN_ROWS"] = 1
        return specs
    stages_mod._split_specs = _specs_rows
if "split_per_sm" in patch: device_mod._SPLIT_CORES_PER_UNIT["cuda"] = patch["split_per_sm"]
if opts:
    Base = plan_mod.KernelLauncher
    class L(Base):
        def __init__(self, kernel, grid, constexprs, options):
            super().__init__(kernel, grid, constexprs, {**options, **opts})
    plan_mod.KernelLauncher = L

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
flushbuf = torch.empty(64 * 2**20, dtype=torch.int32, device="cuda")

def per_kernel(call, reps=3):
    res = {}
    for _ in range(reps):
        flushbuf.zero_(); torch.cuda.synchronize()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                call(); torch.cuda.synchronize()
        for e in prof.events():
            if e.device_type == DeviceType.CUDA:
                res.setdefault(e.name[:40], []).append(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
    return {k: round(statistics.median(v), 1) for k, v in res.items()}

def graph_us(call):
    call()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    return 1000 * triton.testing.do_bench(g.replay, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])[0]

def host(call, n=300):
    for _ in range(5): call()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); call(); ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return round(statistics.median(ts), 1)

cases = OFFICIAL_CASES
if os.environ.get('EXPLORE_CASES'):
    cases = [tuple(int(x) for x in c.split(',')) for c in os.environ['EXPLORE_CASES'].split()]
routes = os.environ.get("EXPLORE_ROUTES", "ascend,ascend:fused").split(",")
settings = os.environ.get("EXPLORE_CORES", "full,40").split(",")
do_host = os.environ.get("EXPLORE_HOST") == "1"
for (R, T, C) in cases:
    w = make_workload(R, T, C, device="cuda")
    a = w.args()
    truth = None
    for setting in settings:
        if setting == "full":
            os.environ.pop("ASCEND_KVC_VECTOR_CORES", None)
        else:
            os.environ["ASCEND_KVC_VECTOR_CORES"] = setting
        api.clear_launch_plans()
        for route in routes:
            out = torch.zeros_like(w.kv_cache)
            c128_256_512_compress(*a[:9], a[9], a[10], a[11], out=out, route=route, validate=True)
            torch.cuda.synchronize()
            from ascend_kvc.validation import check_metadata
            ca = check_metadata(*a, None)
            if truth is None:
                truth = compute_truth(ca)
            rep = check_cache(ca, out, torch.zeros_like(w.kv_cache), truth)
            ok = bool(getattr(rep, "ok", rep))
            call = lambda: c128_256_512_compress(*a[:9], a[9], a[10], a[11], out=out, route=route, validate=False)
            call()
            row = dict(variant=variant, case=f"R{R}-T{T}-C{C}", cores=setting, route=route, ok=ok,
                       graph_us=round(graph_us(call), 1), kernels=per_kernel(call))
            if do_host:
                row["host_us"] = host(call)
            p = next((v for k, v in api._PLANS.items() if k[0] == route), None)
            if p is not None and hasattr(p, "split"):
                row["pieces"] = p.split.pieces
            print(json.dumps(row), flush=True)
    del w, a, truth
    torch.cuda.empty_cache()
