"""Host time per call, C launch on and off, queued and idle; per-launch cost."""
import time, statistics, sys, json
import torch
from ascend_kvc import c128_256_512_compress, api
from ascend_kvc.launch import call_signature
from ascend_kvc.workloads import make_workload

def times(f, n=300, idle=False):
    for _ in range(10): f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        if idle: torch.cuda.synchronize()
        t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return round(statistics.median(ts), 2)

def launchers(plan):
    return [l for l, _, _ in plan.launches] if hasattr(plan, "launches") else [plan.launcher]

print(torch.__version__, __import__("triton").__version__, flush=True)
for (R, T, C) in ((1, 8192, 128), (1, 8192, 256), (1, 8192, 512), (4, 32768, 512), (8, 131072, 128), (8, 131072, 256)):
    w = make_workload(R, T, C, device="cuda")
    a = w.args()
    out = w.kv_cache.clone()
    for route in ("gpgpu", "ascend", "ascend:fused"):
        call = lambda: c128_256_512_compress(*a, out=out, route=route, validate=False)
        call(); call()
        tensors = (*a[:9], out)
        key, plan, ptrs = api._signature(route, tensors, a[9:])
        ls = launchers(plan)
        r = {"case": f"R{R}-T{T}-C{C}", "route": route, "n_launch": len(ls), "c_launch": all(l.calls_c_launch for l in ls)}
        r["signature"] = times(lambda: api._signature(route, tensors, a[9:]), idle=True)
        for idle in (False, True):
            r["api_" + ("idle" if idle else "queued")] = times(call, idle=idle)
        r["plan_idle"] = times(lambda: plan(*tensors, ptrs), idle=True)
        saved = [l.__dict__.pop("launch_compiled") for l in ls if "launch_compiled" in l.__dict__]
        r["api_idle_no_c_launch"] = times(call, idle=True)
        r["api_queued_no_c_launch"] = times(call, idle=False)
        for l, f in zip(ls, saved):
            l.launch_compiled = f
        r["api_idle_again"] = times(call, idle=True)
        print(json.dumps(r), flush=True)
