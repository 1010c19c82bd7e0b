"""Per-kernel device time of the default route's step by token tile against its indexed call,
R1-T8192 C128/256/512 (torch.profiler, CUDA kernels, mean of 50 calls); bytes checked first."""
import torch
from torch.profiler import profile, ProfilerActivity
from torch.autograd import DeviceType
from ascend_kvc import compress_step, c128_256_512_compress
from ascend_kvc.oracle import check_cache
from ascend_kvc.step import boundary_tokens, clear_step_plans
from ascend_kvc.workloads import official_step

def kernels(call, n=50):
    for _ in range(5): call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(n): call()
        torch.cuda.synchronize()
    out = {}
    for e in p.key_averages():
        if e.device_type == DeviceType.CUDA:
            t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
            if t and e.count >= n:
                out[e.key[:40]] = (t / n, e.count // n)
    return out

for route in ("ascend", "ascend:fused"):
    for case in ((1, 8192, 128), (1, 8192, 256), (1, 8192, 512)):
        sw, w = official_step(*case, shuffle=True, nonzero_cache=True, device="cuda")
        found = boundary_tokens(sw.positions, sw.kv_slot_mapping, sw.compress_ratio, sw.state_slot_mapping)
        before = sw.kv_cache.clone(); out = before.clone()
        step_args = (*sw.args()[:-1], out)
        clear_step_plans()
        compress_step(*step_args, **sw.kwargs(), route=route, validate=False); torch.cuda.synchronize()
        wo = sw.as_operator(found)
        assert check_cache(wo.checked_args(), out, before).ok
        s = kernels(lambda: compress_step(*step_args, **sw.kwargs(), route=route, validate=False))
        i = kernels(lambda: c128_256_512_compress(*wo.args(), out=out, route=route, validate=False))
        print(f"## {route} {sw.name}")
        for tag, d in (("step", s), ("indexed", i)):
            print(f"  {tag:8s} total {sum(v[0] for v in d.values()):7.2f} | " + " | ".join(f"{k} {v[0]:.2f}" for k, v in sorted(d.items(), key=lambda kv: -kv[1][0])), flush=True)
