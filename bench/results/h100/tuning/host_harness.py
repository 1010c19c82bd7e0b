"""The script behind host_harness_<commit>.log (run from the repository root of the tree 4d74dab,
PYTHONPATH=.). Does bench.steps' own harness (do_bench, a graph capture, the profiler) move the host time of later calls?"""
import statistics, sys, time
import torch
from ascend_kvc import compress_step
from ascend_kvc import step as step_module
from ascend_kvc.workloads import decode_step, mixed_step
from bench.cli import make_timer, time_graph
from bench.launches import host_samples, count_device_kernels

time_fn = make_timer("cuda")
sync = torch.cuda.synchronize
calls = []
for route, sw in (("gpgpu", decode_step(64, 8, 128, device="cuda")), ("ascend:fused", mixed_step(128, device="cuda")),
                  ("gpgpu", mixed_step(512, device="cuda"))):
    args, kw = sw.args(), sw.kwargs()
    out = args[-1].clone()
    step_args = (*args[:-1], out)
    f = (lambda a=step_args, k=kw, r=route: compress_step(*a, **k, route=r, validate=False))
    f(); sync()
    calls.append((f"{route} {sw.name}", f))

def report(stage):
    for name, f in calls:
        meds = [statistics.median(host_samples(f, sync, 200)) for _ in range(3)]
        print(f"{stage:24s} {name:36s} host median of 200, three rounds: " + " ".join(f"{m:5.1f}" for m in meds), flush=True)

report("fresh process")
for name, f in calls:
    time_fn(f)
report("after do_bench")
for name, f in calls:
    time_graph(f, time_fn)
report("after graph capture")
for name, f in calls:
    count_device_kernels(f, "cuda")
report("after the profiler")
time.sleep(2)
report("2 s later")
