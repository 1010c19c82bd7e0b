"""Graph replay with the counters' fill captured (as before) and without it (the arena), two
rounds alternating, on gpgpu's engine steps and indexed calls; the replay's kernels counted once."""
import torch
from ascend_kvc import c128_256_512_compress, compress_step, step as stepmod, api, launch
from ascend_kvc.workloads import decode_step, official_step
from bench.cli import make_timer, time_graph
time_fn = make_timer("cuda")
arena = launch._graph_counters
old = lambda device, counters: torch.zeros(counters, dtype=torch.int32, device=device)
cases = []
for R, B in ((64, 8), (256, 0), (256, 8)):
    sw = decode_step(R, B, 128, device="cuda")
    cases.append((f"decode-R{R}-B{B}-C128 step", sw, None))
sw, w = official_step(1, 8192, 128, shuffle=True, nonzero_cache=True, device="cuda")
cases += [("R1-T8192-C128 step", sw, None), ("R1-T8192-C128 indexed", None, w)]
sw, w = official_step(8, 131072, 512, shuffle=True, nonzero_cache=True, device="cuda")
cases += [("R8-T131072-C512 step", sw, None)]
for name, sw, w in cases:
    if sw is not None:
        kw = dict(block_size=sw.block_size, compress_ratio=sw.compress_ratio, route="gpgpu", validate=False)
        fn = lambda sw=sw, kw=kw: compress_step(*sw.args(), **kw)
    else:
        fn = lambda w=w: c128_256_512_compress(*w.args(), out=w.kv_cache, route="gpgpu", validate=False)
    res = {}
    for rep in range(2):
        for mode, f in (("fill", old), ("arena", arena)):
            launch._graph_counters = f
            stepmod.clear_step_plans(); api.clear_launch_plans()
            ms = time_graph(fn, time_fn)
            res.setdefault(mode, []).append(round(ms * 1000, 2))
    launch._graph_counters = arena
    print(name, res, flush=True)
