"""The script behind step_paths_a641d73.log (run from the repository root, PYTHONPATH=.): gpgpu's
step on official cases on its token tiles and on the search path, and the call with the indices
given, graph replay (bench's timer, L2 flushed), twice each, alternating. It checks no bytes: the
same kernels passed the oracle in the GPU suite and in bench.steps of the same runs."""
import torch
from ascend_kvc import c128_256_512_compress, compress_step, step as stepmod
from ascend_kvc.workloads import official_step
from bench.cli import make_timer, time_graph
from gpgpu_fallback import route as R
time_fn = make_timer("cuda")
for case in [(8, 65536, 512), (4, 32768, 512), (8, 131072, 128), (8, 131072, 512)]:
    sw, w = official_step(*case, shuffle=True, nonzero_cache=True, device="cuda")
    kw = dict(block_size=sw.block_size, compress_ratio=sw.compress_ratio, route="gpgpu", validate=False)
    step = lambda: compress_step(*sw.args(), **kw)
    idx = lambda: c128_256_512_compress(*w.args(), out=w.kv_cache, route="gpgpu", validate=False)
    res = {}
    for rep in range(2):
        for mode in ("tiles", "search", "indexed"):
            R.STEP_TILE_MAX_REQUESTS = 0 if mode == "search" else 16
            stepmod.clear_step_plans()
            ms = time_graph(idx if mode == "indexed" else step, time_fn)
            res.setdefault(mode, []).append(round(ms * 1000, 1))
    print(case, res, flush=True)
