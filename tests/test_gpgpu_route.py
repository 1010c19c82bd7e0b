"""The gpgpu route's one-launch kernel: every block size, windows inside one block, the
arrival counters it leaves at zero, and (on a GPU) streams, devices and kernel counts.

On a CPU-only machine these run under TRITON_INTERPRET=1 (small shapes); with a CUDA GPU the
same tests run compiled, and the ``cuda`` ones add what only a GPU can show.
"""

import pytest
import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc import launch
from ascend_kvc.oracle import check_cache
from ascend_kvc.workloads import make_workload

from cases import general_case, run_and_check

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("C,block_size", [(128, 64), (256, 128), (128, 256)])
def test_tall_blocks(C, block_size):
    """Blocks taller than a step are walked in row chunks (windows cross at most one block edge)."""
    w = general_case(C, block_size, seed=block_size, num_reqs=1, outputs_per_req=3, device=DEVICE)
    run_and_check(w, "gpgpu")


@pytest.mark.parametrize("C,block_size", [(128, 512), (256, 3000)])
def test_windows_inside_one_block(C, block_size):
    """block_size >= C, up to past 2048 rows (a [blocks, next_pow2(block_size), D] tile could not
    be built there); p = C - 1 puts a window inside the first block."""
    w = general_case(C, block_size, seed=7, num_reqs=1, outputs_per_req=3, tokens_per_req=block_size + C + 40,
                     device=DEVICE)
    report = run_and_check(w, "gpgpu")
    assert report.num_outputs_written >= 2


def test_repeat_calls_leave_counters_at_zero():
    """The last program of each output resets its arrival counter: a second call (other slots,
    other state) is right too, and the stream's counters read zero afterwards."""
    a = general_case(128, 8, seed=101, num_reqs=2, outputs_per_req=2, device=DEVICE)
    b = general_case(128, 8, seed=102, num_reqs=2, outputs_per_req=2, device=DEVICE)
    for w in (a, b, a):
        run_and_check(w, "gpgpu", validate=False)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    counters = [c for (dev, _), (_, c) in launch._SCRATCH.items() if dev.type == DEVICE]
    assert counters and all(int(c.abs().sum()) == 0 for c in counters)


@pytest.mark.cuda
def test_cuda_one_kernel_per_call():
    w = make_workload(1, 8192, 128, shuffle=True, nonzero_cache=True, seed=4, device="cuda")
    out = w.kv_cache.clone()
    for _ in range(2):  # compile, build the plan, then use it
        c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(kernels) == 1, kernels


@pytest.mark.cuda
def test_cuda_graph_replays_one_kernel():
    """A captured call replays its one kernel and no fill of its arrival counters (they come
    zeroed from outside the capture), and its first replay writes the oracle's bytes."""
    w = make_workload(1, 8192, 128, shuffle=True, nonzero_cache=True, seed=6, device="cuda")
    out = w.kv_cache.clone()
    c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)  # compile, plan, counters
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
    out.copy_(w.kv_cache)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(kernels) == 1, kernels
    report = check_cache(w.checked_args(), out, w.kv_cache)
    assert report.ok, str(report)


@pytest.mark.cuda
def test_cuda_runs_on_the_current_stream():
    """Queued behind a long sleep on a side stream, the call has written nothing when the default
    stream looks, and everything once the side stream is done."""
    w = make_workload(1, 8192, 256, shuffle=True, nonzero_cache=True, seed=5, device="cuda")
    before = w.kv_cache.clone()
    out = before.clone()
    c128_256_512_compress(*w.args(), out=out.clone(), route="gpgpu", validate=False)  # compile, plan
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU clock cycles
        c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
    seen_early = out.clone()  # on the default stream, which does not wait for `side`
    side.synchronize()
    assert torch.equal(seen_early, before), "the kernel did not run on the current (side) stream"
    assert check_cache(w.checked_args(), out, before).ok


@pytest.mark.cuda
def test_cuda_two_streams_at_once():
    """Calls queued on two streams run at once (both held behind a sleep, then drained together,
    small grids); each stream has its own scratch and arrival counters."""
    ws = [general_case(C, 8, seed=C, num_reqs=3, outputs_per_req=3, device="cuda") for C in (128, 256)]
    outs = [w.kv_cache.clone() for w in ws]
    for w, out in zip(ws, outs):
        c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in ws]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)
    for _ in range(100):
        for s, w, out in zip(streams, ws, outs):
            with torch.cuda.stream(s):
                c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
    torch.cuda.synchronize()
    for w, out in zip(ws, outs):
        report = check_cache(w.checked_args(), out, w.kv_cache)
        assert report.ok, str(report)
    scratch = {key: bufs for key, bufs in launch._SCRATCH.items() if key[1] in {s.cuda_stream for s in streams}}
    assert len(scratch) == 2, "the two streams share their scratch"


@pytest.mark.cuda
def test_cuda_graphs_replayed_on_two_streams():
    """Each captured call owns its scratch: two graphs replayed at once do not share it."""
    ws = [make_workload(4, 32768, C, shuffle=True, nonzero_cache=True, seed=C + 1, device="cuda") for C in (128, 512)]
    outs = [w.kv_cache.clone() for w in ws]
    graphs = []
    for w, out in zip(ws, outs):
        c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)  # compile outside capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
        graphs.append(g)
    torch.cuda.synchronize()
    for out, w in zip(outs, ws):
        out.copy_(w.kv_cache)
    streams = [torch.cuda.Stream() for _ in ws]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    for _ in range(10):
        for s, g in zip(streams, graphs):
            with torch.cuda.stream(s):
                g.replay()
    torch.cuda.synchronize()
    for w, out in zip(ws, outs):
        report = check_cache(w.checked_args(), out, w.kv_cache)
        assert report.ok, str(report)


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second CUDA device")
def test_cuda_second_device_while_first_is_current():
    w = make_workload(1, 8192, 128, shuffle=True, nonzero_cache=True, seed=6, device="cuda:1")
    with torch.cuda.device(0):
        for _ in range(2):
            out = w.kv_cache.clone()
            c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
    torch.cuda.synchronize(1)
    assert check_cache(w.checked_args(), out, w.kv_cache).ok


def test_tile_table_covers_every_output_count():
    """Tile steps by output count rise and end in an open step, so every call finds tiles."""
    from gpgpu_fallback import tuning

    for (kind, C), entry in tuning.TILES_BY_RATIO.items():
        if isinstance(entry, tuple):
            limits = [most for most, _ in entry]
            assert limits[-1] is None and limits[:-1] == sorted(set(limits[:-1])), (kind, C)
            assert tuning.tiles_for(kind, C, limits[0]) is entry[0][1]
            assert tuning.tiles_for(kind, C, limits[0] + 1) is entry[1][1]
        for n in (0, 1, 16, 17, 256, 257, 10**6):
            assert isinstance(tuning.tiles_for(kind, C, n), tuning.GpgpuTiles)
