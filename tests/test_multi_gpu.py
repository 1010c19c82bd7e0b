"""Two or more CUDA GPUs: a call runs on its tensors' device whatever the current device is, the
per-device plan and scratch caches keep devices apart, and one process per GPU (NCCL) works.

Skipped, with the reason, on a machine with fewer than two CUDA GPUs. Not yet run on one.

A route that launches its Triton kernels with ``kernel[grid]`` runs them on Triton's current
device, not the tensors'; on cuda:1 data with cuda:0 current that is a Triton error about the
pointers or an illegal address that spoils cuda:0 for the rest of the process. Run this module
on its own first (``pytest tests/test_multi_gpu.py``); the NCCL test runs in fresh processes.
"""

import datetime
import os
import socket

import pytest
import torch

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress
from ascend_kvc.oracle import check_cache

from cases import general_case

GPUS = torch.cuda.device_count()
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(GPUS < 2, reason=f"needs 2 CUDA GPUs, this machine has {GPUS}")]

ROUTES = ["reference", "gpgpu", *(f"ascend:{stage}" for stage in ASCEND_STAGES)]


def _case(device, variant=0):
    """Same shapes for every variant (general_case's seed fixes them); other state values, cache
    bytes and, for odd variants, other slots. Built on the CPU, so any device gets the same data."""
    w = general_case(128, 8, seed=61, num_reqs=2, outputs_per_req=4)
    g = torch.Generator().manual_seed(1000 + variant)
    if variant:
        w.state_cache = torch.randn(w.state_cache.shape, generator=g)
        w.kv_cache = torch.randint(0, 256, w.kv_cache.shape, dtype=torch.uint8, generator=g)
    if variant % 2:
        b = w.boundary_token_indices
        w.kv_slot_mapping[b] = w.kv_slot_mapping[b].flip(0)
    for name in ("state_cache", "token_to_req", "positions", "boundary_token_indices", "block_table",
                 "rms_norm_weight", "cos_sin_cache", "kv_slot_mapping", "kv_cache"):
        setattr(w, name, getattr(w, name).to(device))
    return w


def _call(w, out, route, validate=False):
    return c128_256_512_compress(*w.args(), out=out, route=route, validate=validate)


# --- (a) tensors on cuda:1 while cuda:0 is current ---------------------------------------------

@pytest.mark.parametrize("route", ROUTES)
def test_every_route_on_the_second_gpu_while_the_first_is_current(route):
    w = _case("cuda:1")
    with torch.cuda.device(0):
        for validate in (True, False, False):  # checked, then the validate=False repeat path
            before = w.kv_cache.clone()
            out = before.clone()
            assert _call(w, out, route, validate) is out
            assert torch.cuda.current_device() == 0, "the call changed the current device"
            torch.cuda.synchronize(1)
            report = check_cache(w.checked_args(), out, before)
            assert report.ok and report.num_outputs_written > 0, f"{route}: {report}"
        fresh = c128_256_512_compress(*w.args(), route=route, validate=False)  # out=None
        assert fresh.device == w.kv_cache.device
        torch.cuda.synchronize(1)
        assert check_cache(w.checked_args(), fresh, torch.zeros_like(fresh)).ok


@pytest.mark.parametrize("route", ["gpgpu", "ascend:fused"])
def test_cuda_graph_captured_on_the_second_gpu_replays_exactly(route):
    captured = _case("cuda:1")
    static_state, out = captured.state_cache, captured.kv_cache  # the graph reads and writes these

    with torch.cuda.device(1):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            _call(captured, out, route)  # compile and plan outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _call(captured, out, route)

        g = torch.Generator(device="cuda:1").manual_seed(5)
        for step in range(3):  # new state values and cache bytes in the captured tensors
            static_state.copy_(torch.randn(static_state.shape, device="cuda:1", generator=g))
            start = torch.randint(0, 256, out.shape, dtype=torch.uint8, device="cuda:1", generator=g)
            out.copy_(start)
            graph.replay()
            eager = _call(captured, start.clone(), route)
            torch.cuda.synchronize(1)
            assert torch.equal(out, eager), f"replay {step} differs from an eager call"
            report = check_cache(captured.checked_args(), out, start)
            assert report.ok and report.num_outputs_written > 0, f"replay {step}: {report}"


# --- (b) the same shapes on two devices, alternating --------------------------------------------

@pytest.mark.parametrize("route", ["reference", "gpgpu", "ascend:fused"])
def test_alternating_devices_keep_their_plans_scratch_and_caches_apart(route):
    caches = {d: _case(f"cuda:{d}").kv_cache.clone() for d in (0, 1)}
    with torch.cuda.device(0):
        for step in range(4):
            for d in (0, 1):
                w = _case(f"cuda:{d}", variant=2 * step + d + 1)  # new tensors, same signature
                before = {k: v.clone() for k, v in caches.items()}
                _call(w, caches[d], route)
                torch.cuda.synchronize(0)
                torch.cuda.synchronize(1)
                report = check_cache(w.checked_args(), caches[d], before[d])
                assert report.ok and report.num_outputs_written > 0, f"step {step}, cuda:{d}: {report}"
                assert torch.equal(caches[1 - d], before[1 - d]), f"a call on cuda:{d} wrote cuda:{1 - d}'s cache"


# --- (c) one process per GPU, NCCL --------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world_size: int, port: int) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=120))
    try:
        w = _case(f"cuda:{rank}", variant=rank + 1)  # this rank's own requests and cache
        out = w.kv_cache.clone()
        _call(w, out, "auto", validate=True)
        _call(w, out, "auto")  # the repeat path: the same bytes again
        gathered = [torch.empty_like(out) for _ in range(world_size)]
        dist.all_gather(gathered, out)
        torch.cuda.synchronize()
        if rank == 0:
            for r, got in enumerate(gathered):
                mine = _case("cuda:0", variant=r + 1)  # rank r's inputs, rebuilt from its seed
                report = check_cache(mine.checked_args(), got, mine.kv_cache)
                assert report.ok and report.num_outputs_written > 0, f"rank {r}: {report}"
            assert not torch.equal(gathered[0], gathered[1]), "two ranks wrote the same bytes"
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_nccl_available(),
                    reason="torch.distributed with NCCL is not available")
def test_one_process_per_gpu_with_nccl():
    import torch.multiprocessing as mp

    # Raises in this process, with the rank's traceback, if any rank fails.
    mp.spawn(_rank_main, args=(GPUS, _free_port()), nprocs=GPUS, join=True)
