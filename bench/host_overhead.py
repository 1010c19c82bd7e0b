"""Where the host time of one call goes: ``python -m bench.host_overhead [R T C route]``.

Queues many calls without waiting for the device (the same measurement as the report's host µs
column, ``bench.launches.host_us_per_call``) and profiles them with cProfile; prints the host
microseconds per call and the functions that take them. Runs on the device found (npu -> cuda ->
cpu; on CPU the Triton routes run under the interpreter, so its times are the interpreter's).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys


def main() -> int:
    from bench.machine import detect_device, synchronize

    device = detect_device()
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from ascend_kvc import c128_256_512_compress
    from ascend_kvc.workloads import make_workload
    from bench.launches import host_us_per_call

    r, t, c = (int(x) for x in (sys.argv[1:4] or (1, 8192, 128)))
    route = sys.argv[4] if len(sys.argv) > 4 else "gpgpu"
    w = make_workload(r, t, c, shuffle=True, nonzero_cache=True, device=device)
    out = w.kv_cache.clone()
    args = w.args()

    def call():
        return c128_256_512_compress(*args, out=out, route=route, validate=False)

    n = 300 if device != "cpu" else 3
    for _ in range(min(n, 5)):
        call()
    host_us = host_us_per_call(call, lambda: synchronize(device), n)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    synchronize(device)
    print(f"{w.name} {route} on {device}: {host_us:.1f} us of host time per call (median of {n})")
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
