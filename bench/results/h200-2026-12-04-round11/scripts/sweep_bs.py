"""Block sizes other than the official 8: graph replay of gpgpu, the default and fused, on the GPU's
own grid and at 40 programs (ASCEND_KVC_VECTOR_CORES=40). Every run checked against the oracle
first; contiguous tables. Prints one JSON line per (case, block size)."""
import json, os, sys, time
import torch, triton.testing
from ascend_kvc import c128_256_512_compress, api
from ascend_kvc.oracle import check_cache, compute_truth
from ascend_kvc.validation import check_metadata
from ascend_kvc.workloads import make_workload
import ascend_kvc.stages as _stages
if os.environ.get("SWEEP_VOLATILE") == "0":  # plain row loads on CUDA too
    _stages.VOLATILE_ROWS_ON_CUDA.update(unsplit=False, piece=False)
VARIANT = os.environ.get("SWEEP_VARIANT", "")


def graph_us(call):
    call()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    return round(1000 * triton.testing.do_bench(g.replay, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])[0], 2)


def measure(a, ca, truth, w, route, cores):
    if cores:
        os.environ["ASCEND_KVC_VECTOR_CORES"] = str(cores)
    else:
        os.environ.pop("ASCEND_KVC_VECTOR_CORES", None)
    api.clear_launch_plans()
    out = torch.zeros_like(w.kv_cache)
    c128_256_512_compress(*a, out=out, route=route, validate=True)
    torch.cuda.synchronize()
    if not bool(check_cache(ca, out, torch.zeros_like(w.kv_cache), truth).ok):
        return "WRONG", None
    p = next((v for k, v in api._PLANS.items() if k[0] == route), None)
    tag = None
    if p is not None and hasattr(p, "split"):
        tag = f"{'split' if p.split.split else 'unsplit'}/{p.split.programs}"
    return graph_us(lambda: c128_256_512_compress(*a, out=out, route=route, validate=False)), tag


cases = [tuple(int(x) for x in c.split(",")) for c in sys.argv[1].split()]
sizes = [int(x) for x in sys.argv[2].split(",")]
t0 = time.time()
for case in cases:
    for bs in sizes:
        w = make_workload(*case, block_size=bs, device="cuda")
        a = w.args()
        ca = check_metadata(*a, None)
        truth = compute_truth(ca)
        bytes_read = w.num_outputs * case[2] * 1024 * 4
        row = dict(variant=VARIANT, case=w.name, bs=bs, outputs=w.num_outputs, MiB=bytes_read / 2**20)
        row["gpgpu"], _ = measure(a, ca, truth, w, "gpgpu", None)
        for cores in (None, 40):
            for route in ("ascend:fused", "ascend"):
                us, tag = measure(a, ca, truth, w, route, cores)
                row[f"{route.split(':')[-1]}@{cores or 'full'}"] = us
                row[f"plan_{route.split(':')[-1]}@{cores or 'full'}"] = tag
        row["t"] = round(time.time() - t0)
        print(json.dumps(row), flush=True)
        del w, a, ca, truth
        torch.cuda.empty_cache()
