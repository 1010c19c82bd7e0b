"""The work split of the default and ``fused`` rungs, judged by the oracle.

``ASCEND_KVC_VECTOR_CORES`` sizes the Ascend grids as for that many vector cores: 1 core never
splits; more cores than outputs split every window into pieces whose edges fall anywhere in a
physical block (block sizes that do and do not divide the piece length, one-row blocks, blocks
larger than the window), and the merge must give the unsplit bytes.
"""

import pytest
import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.device import ascend_programs, persistent_programs
from ascend_kvc.oracle import check_cache
from ascend_kvc.stages.work_split import plan_split
from ascend_kvc.workloads import make_workload

from cases import general_case, run_and_check

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
PLANNED = ["ascend", "ascend:fused"]


@pytest.mark.parametrize("route", PLANNED)
@pytest.mark.parametrize("n_cores,block_size", [(1, 8), (5, 3), (7, 1), (13, 16), (64, 130)])
def test_split_and_unsplit_windows_match_the_oracle(route, n_cores, block_size, cores):
    cores(n_cores)
    w = general_case(128, block_size, seed=n_cores, num_reqs=1, outputs_per_req=3, device=DEVICE)
    n = w.boundary_token_indices.numel()
    assert plan_split(n, 128, n_cores).split == (n_cores > 1)
    run_and_check(w, route, validate=False)
    run_and_check(w, route, validate=False, inplace=False)  # the cached plan, out=None


@pytest.mark.parametrize("route", PLANNED)
def test_runs_that_hold_several_windows_match_the_oracle(route, cores):
    """7 outputs on 3 cores: each run is 2 1/3 windows long, so a program pools the end of one
    window, a whole window and the start of a third, and the merge takes each window's pieces
    from the right slots."""
    cores(3)
    w = general_case(128, 5, seed=3, num_reqs=1, outputs_per_req=7, device=DEVICE)
    split = plan_split(w.boundary_token_indices.numel(), 128, 3)
    assert split.split and split.programs == 3 and split.piece_slots == 3, split
    run_and_check(w, route, validate=False)


@pytest.mark.parametrize("route", PLANNED)
def test_split_c512_bf16_state(route, cores):
    cores(48)
    w = general_case(512, 16, seed=48, num_reqs=1, outputs_per_req=2, device=DEVICE, state_dtype=torch.bfloat16)
    assert plan_split(w.boundary_token_indices.numel(), 512, 48).pieces > 16
    run_and_check(w, route)


@pytest.mark.parametrize("route", PLANNED)
def test_split_skips_bad_outputs_and_writes_the_rest(route, cores):
    """A bad block id in one piece of a window skips the whole output, as unsplit."""
    cores(8)
    w = general_case(128, 8, seed=9, num_reqs=2, outputs_per_req=2, device=DEVICE)
    w.block_table[0, 3] = w.state_cache.shape[0] + 5  # outputs of request 0 whose window reads it
    report = run_and_check(w, route, validate=False)
    assert report.num_outputs_written >= 1


@pytest.mark.parametrize("route", PLANNED)
@pytest.mark.parametrize("n_cores", [1, 8])
@pytest.mark.parametrize("where", ["first", "last"])
def test_a_bad_block_anywhere_in_the_window_skips_the_output(route, n_cores, where, cores):
    """A bad block id in the window's first or last block skips the output, unsplit (1 core: the
    whole-window kernels' own check) and split (8 cores: the bad block's piece is the window's
    first or a later one, whose count the merge must add in)."""
    cores(n_cores)
    w = general_case(128, 8, seed=9, num_reqs=2, outputs_per_req=2, device=DEVICE, skip_some=False)
    assert plan_split(w.boundary_token_indices.numel(), 128, n_cores).split == (n_cores > 1)
    t = int(w.boundary_token_indices[0])
    r, p = int(w.token_to_req[t]), int(w.positions[t])
    col = (p - 127) // 8 if where == "first" else p // 8
    w.block_table[r, col] = w.state_cache.shape[0] + 5
    report = run_and_check(w, route, validate=False)
    assert report.num_outputs_written <= w.num_outputs - 1, report


@pytest.mark.parametrize("route", PLANNED)
def test_split_skips_outputs_with_out_of_range_indices(route, cores):
    """Outputs whose slot is valid but whose request or position is not: the piece gather finds
    them invalid and the merge, which reads no index tensor, must skip them too."""
    cores(8)
    w = general_case(128, 8, seed=11, num_reqs=2, outputs_per_req=3, device=DEVICE, skip_some=False)
    b = w.boundary_token_indices
    w.token_to_req[b[0]] = w.block_table.shape[0] + 3  # a request past the table
    w.positions[b[4]] = 126  # a window that would start before position 0
    report = run_and_check(w, route, validate=False)
    assert report.num_outputs_written == b.numel() - 2, report


def test_vector_cores_sizes_every_ascend_grid(monkeypatch):
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", "40")
    assert ascend_programs(torch.device("cpu")) == 40
    assert persistent_programs(torch.device("cpu"), 1000) == 40
    assert persistent_programs(torch.device("cpu"), 3) == 3
    for bad in ("0", "-2", "forty", "4.5"):
        monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", bad)
        with pytest.raises(ValueError, match="ASCEND_KVC_VECTOR_CORES"):
            ascend_programs(torch.device("cpu"))
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", "")
    assert ascend_programs(torch.device("cpu")) == 4  # the interpreter's default


@pytest.mark.cuda
@pytest.mark.parametrize("route", PLANNED)
@pytest.mark.parametrize("n_cores", [None, 40])
def test_cuda_graph_capture_default_and_fused(route, n_cores, cores):
    """With validate=False both planned rungs capture into a CUDA graph (the stand-in for an NPU
    graph), split (40 cores, 32 outputs) or not, and the replay writes the oracle's bytes."""
    if n_cores is not None:
        cores(n_cores)
    w = make_workload(1, 8192, 256, shuffle=True, nonzero_cache=True, seed=5, device="cuda")
    before = w.kv_cache.clone()
    out = before.clone()
    c128_256_512_compress(*w.args(), out=out, route=route, validate=False)  # compile outside capture
    out.copy_(before)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        c128_256_512_compress(*w.args(), out=out, route=route, validate=False)
    out.copy_(before)
    graph.replay()
    torch.cuda.synchronize()
    assert check_cache(w.checked_args(), out, before).ok
