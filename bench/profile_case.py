"""Run one case of one route a few times, for a profiler: ``python -m bench.profile_case R T C route``.

    ncu --clock-control none -k regex:_window_compress -c 1 python -m bench.profile_case 8 131072 512 gpgpu
"""

from __future__ import annotations

import sys

import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.workloads import make_workload


def main() -> int:
    r, t, c = (int(x) for x in sys.argv[1:4])
    route = sys.argv[4] if len(sys.argv) > 4 else "gpgpu"
    w = make_workload(r, t, c, shuffle=True, nonzero_cache=True, device="cuda")
    out = w.kv_cache.clone()
    for _ in range(3):
        c128_256_512_compress(*w.args(), out=out, route=route, validate=False)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
