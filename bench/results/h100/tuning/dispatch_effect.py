"""Does count_framework_ops (a TorchDispatchMode session) move the host time of later calls? The main job's pass 1 runs it after each host time."""
import statistics
import torch
from ascend_kvc import c128_256_512_compress
from ascend_kvc.workloads import make_workload
from bench.launches import host_samples, count_device_kernels, count_framework_ops

sync = torch.cuda.synchronize
calls = []
for route, (r, t, c) in (("gpgpu", (1, 8192, 128)), ("ascend:fused", (1, 8192, 512)), ("ascend", (1, 8192, 128))):
    w = make_workload(num_reqs=r, total_tokens=t, compress_ratio=c, shuffle=True, nonzero_cache=True, seed=0, device="cuda")
    out = w.kv_cache.clone()
    f = (lambda w=w, out=out, route=route: c128_256_512_compress(*w.args(), out=out, route=route, validate=False))
    f(); sync()
    calls.append((f"{route} {w.name}", f))

def report(stage):
    for name, f in calls:
        meds = [statistics.median(host_samples(f, sync, 200)) for _ in range(3)]
        print(f"{stage:28s} {name:28s} host median of 200, three rounds: " + " ".join(f"{m:5.1f}" for m in meds), flush=True)

report("fresh process")
report("fresh process, again")
for name, f in calls:
    print(name, count_framework_ops(f, "cuda"))
report("after count_framework_ops")
for name, f in calls:
    count_framework_ops(f, "cuda")
report("after it twice")
for name, f in calls:
    count_device_kernels(f, "cuda", warmup=True)
report("after the profiler")
