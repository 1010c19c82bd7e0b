"""ncu driver: one call each of the default and fused at 40 programs on one case (kernels
compiled first by a call outside ncu's count: ncu is told to skip them)."""
import os, sys
os.environ["ASCEND_KVC_VECTOR_CORES"] = "40"
import torch
from ascend_kvc import c128_256_512_compress
from ascend_kvc.workloads import make_workload
R, T, C = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "8,65536,128").split(","))
w = make_workload(R, T, C, device="cuda")
a = w.args()
out = torch.zeros_like(w.kv_cache)
for route in ("ascend", "ascend:fused"):
    c128_256_512_compress(*a[:9], a[9], a[10], a[11], out=out, route=route, validate=False)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for route in ("ascend", "ascend:fused"):
    c128_256_512_compress(*a[:9], a[9], a[10], a[11], out=out, route=route, validate=False)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("done")
