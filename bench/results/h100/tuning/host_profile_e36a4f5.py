"""Where a step's host time goes: the whole call, the plan call alone, the launches alone.

Run from the repository root on a CUDA machine: PYTHONPATH=$PWD python3 <this file> gpgpu,ascend:fused
(the recorded log: its output less the lines holding "Warn"; its first line is what is left of a warning)."""
import statistics, sys, time
import torch
from ascend_kvc import compress_step
from ascend_kvc import step as step_module
from ascend_kvc.launch import KernelLauncher, call_signature
from ascend_kvc.workloads import decode_step, mixed_step

def med(f, n=400):
    for _ in range(20): f()
    torch.cuda.synchronize()
    xs = []
    for _ in range(n):
        t = time.perf_counter(); f(); xs.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(xs)

for route in sys.argv[1].split(","):
    for name, sw in (("mixed-C128", mixed_step(128, device="cuda")), ("mixed-C512", mixed_step(512, device="cuda")),
                     ("decode-R64-B8", decode_step(64, 8, 128, device="cuda"))):
        step_module.clear_step_plans()
        args, kw = sw.args(), sw.kwargs()
        call = lambda: compress_step(*args, **kw, route=route, validate=False)
        call(); torch.cuda.synchronize()
        (plan,) = step_module._STEP_PLANS.values()
        slots3 = sw.kv_slot_mapping if sw.state_slot_mapping is None else sw.state_slot_mapping
        tensors = (args[0], args[1], args[2], slots3, args[3], args[4], args[5], args[6], args[7])
        scal = (sw.block_size, sw.compress_ratio, kw["rms_norm_eps"], sw.state_slot_mapping is None, "int8", False)
        sig = lambda: call_signature(tensors, scal)
        _, ptrs = sig()
        plan_only = lambda: plan(*tensors, args[7], ptrs)
        # time spent inside launch_compiled
        spent = [0.0, 0]
        launchers = [o for o in __import__("gc").get_objects() if isinstance(o, KernelLauncher) and "launch_compiled" in o.__dict__]
        orig = {}
        for L in launchers:
            f = orig[id(L)] = L.__dict__["launch_compiled"]
            def wrap(stream, *a, _f=f):
                t = time.perf_counter(); _f(stream, *a); spent[0] += time.perf_counter() - t; spent[1] += 1
            L.launch_compiled = wrap
        spent[:] = [0.0, 0]
        full = med(call)
        per = spent[0] / max(spent[1], 1) * 1e6
        nl = spent[1] / 420
        for L in launchers:
            L.launch_compiled = orig[id(L)]
        print(f"{route:13s} {name:14s} full {full:5.1f} us | signature {med(sig):4.1f} | plan call {med(plan_only):5.1f} "
              f"| {nl:.1f} launches/call at {per:4.1f} us each (with wrapper)", flush=True)
