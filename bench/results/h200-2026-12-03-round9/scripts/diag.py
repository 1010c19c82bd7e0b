"""Diagnose the one-launch fused split's slowdown at 40 programs: graph replay per variant."""
import os, sys, json, torch
from ascend_kvc import c128_256_512_compress, api
from ascend_kvc.oracle import check_cache
from ascend_kvc.workloads import make_workload
from bench.sweep_gpgpu import graph_ms
variant = sys.argv[1]
rows = []
for case in ((1, 8192, 512), (4, 32768, 512), (8, 131072, 512), (1, 8192, 128)):
    w = make_workload(*case, seed=3, device="cuda")
    args = w.args(); zero = w.kv_cache.clone(); out = zero.clone()
    call = lambda: c128_256_512_compress(*args[:8], out, *args[9:], out=out, route="ascend:fused", validate=False)
    call(); torch.cuda.synchronize()
    ok = check_cache(w.checked_args(), out, zero).ok
    g = 1e3 * graph_ms(call)
    rows.append({"variant": variant, "case": w.name, "ok": ok, "graph_us": round(g, 1)})
    print(rows[-1], flush=True)
    api.clear_launch_plans()
    del w, args, zero, out
    torch.cuda.empty_cache()
with open(os.path.join(os.environ["OUT"], f"diag_{variant}.json"), "w") as f:
    json.dump(rows, f)
