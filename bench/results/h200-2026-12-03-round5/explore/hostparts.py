import time, statistics, torch
from ascend_kvc import c128_256_512_compress, api
from ascend_kvc.launch import call_signature
from ascend_kvc.workloads import make_workload

def med(f, n=400):
    for _ in range(10): f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return round(statistics.median(ts), 2)

for (R, T, C) in ((1, 8192, 256), (8, 131072, 128), (4, 32768, 512)):
    w = make_workload(R, T, C, device="cuda")
    a = w.args()
    out = w.kv_cache.clone()
    for route in ("gpgpu", "ascend", "ascend:fused"):
        call = lambda: c128_256_512_compress(*a, out=out, route=route, validate=False)
        call()
        tensors = (*a[:9], out)
        key, plan, ptrs = api._signature(route, tensors, a[9:])
        r = {"case": f"R{R}-T{T}-C{C}", "route": route, "api": med(call),
             "signature": med(lambda: api._signature(route, tensors, a[9:])),
             "plan_call": med(lambda: plan(*tensors, ptrs))}
        if hasattr(plan, "launches"):
            for j, (launcher, arguments, fills) in enumerate(plan.launches):
                filled = list(arguments)
                vals = [*ptrs[:9], out.data_ptr()] + [0] * 8
                # real scratch addresses
                from ascend_kvc.launch import stream_scratch
                stream = torch.cuda.current_stream().cuda_stream
                sc = stream_scratch(plan.device, stream, -(-plan.scratch_bytes // 4), 0)[0] if plan.scratch_bytes else None
                base = sc.data_ptr() if sc is not None else 0
                vals = [*ptrs[:9], out.data_ptr(), *(base + off for off in plan._scratch_offsets)]
                for pos, src in fills:
                    filled[pos] = vals[src]
                r[f"launch{j}"] = med(lambda: launcher.launch_compiled(stream, *filled))
            r["empty_fn"] = med(lambda: None)
        print(r, flush=True)
