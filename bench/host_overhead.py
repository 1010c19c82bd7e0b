"""Where the host time of one call goes: ``python -m bench.host_overhead [R T C route]``.

Queues many calls without waiting for the GPU and profiles them with cProfile; prints the host
microseconds per call and the functions that take them.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.workloads import make_workload


def main() -> int:
    r, t, c = (int(x) for x in (sys.argv[1:4] or (1, 8192, 128)))
    route = sys.argv[4] if len(sys.argv) > 4 else "gpgpu"
    w = make_workload(r, t, c, shuffle=True, nonzero_cache=True, device="cuda")
    out = w.kv_cache.clone()
    args = w.args()
    for _ in range(5):
        c128_256_512_compress(*args, out=out, route=route, validate=False)
    torch.cuda.synchronize()
    n = 300
    t0 = time.perf_counter()
    for _ in range(n):
        c128_256_512_compress(*args, out=out, route=route, validate=False)
    host_us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        c128_256_512_compress(*args, out=out, route=route, validate=False)
    prof.disable()
    torch.cuda.synchronize()
    print(f"{w.name} {route}: {host_us:.1f} us of host time per call")
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
