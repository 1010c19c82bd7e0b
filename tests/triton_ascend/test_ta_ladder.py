"""Every ``ascend:<stage>`` under triton-ascend 3.2.0's own interpreter, judged by the oracle.

The stages come from ``ascend_kvc.ASCEND_STAGES`` when this module is collected, so a new rung
runs here without an edit. Each runs, on CPU tensors, on one case per code path (kept small: the
interpreter runs every program of every launch in Python):

- the three golden cases of tests/test_golden.py (C=128; block sizes 4, 3 and 256: whole blocks,
  a window from row 2 of one block to row 0 of another, a window inside one block), with a
  skipped output: the hand-derived bytes and ``oracle.check_cache``;
- window geometry from tests/test_exhaustive.py: block size 1 (a lookup per row), 8 (windows
  starting at a block boundary and not), 200 (a non-divisor of C larger than C: windows inside
  one block at its start, middle and end, and across two blocks);
- two examples per stage of tests/test_fuzz.py's valid-input strategy (C 128 to 512, block sizes
  4 to 256, fp32/bf16 state, int32/int64 and strided index tensors, wide state rows, in place or a
  fresh cache), at most 512 window rows a call;
- ``ASCEND_KVC_VECTOR_CORES=8`` (grids and the work split as for 8 vector cores) with 1 output at
  C=128 and 2 at C=512 (RoPE rows other than 0): the rungs that split windows run the piece
  gather and the merge; and the same cases on one vector core, where they run unsplit.

Every call also records the Triton kernels it launched (through the interpreter's
``GridExecutor``): each must be one of its stage's ``stages.kernel_specializations``, at least
one must run, and the last test checks that every kernel of every stage ran somewhere in this
folder (the byte scatter, the quantiser, the split-window kernels included).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from ascend_kvc import ASCEND_STAGES, api, c128_256_512_compress, routes
from ascend_kvc.oracle import check_cache
from ascend_kvc.stages import kernel_specializations
from ascend_kvc.stages.work_split import plan_split
from ascend_kvc.validation import check_metadata

from cases import run_and_check
from test_exhaustive import EDGE_GEOMETRIES, _edge_case
from test_fuzz import FUZZ, valid_cases
from test_golden import GEOMETRIES, _expected_page, _first_difference, golden_inputs

STAGES = list(ASCEND_STAGES)
SPLITTING = set(getattr(routes, "ASCEND_PLANNED_STAGES", ()))
VECTOR_CORES_ENV = "ASCEND_KVC_VECTOR_CORES"

# block_size -> boundary positions (C = 128), taken from test_exhaustive's table; block size 1
# keeps one window (128 lookups), the others keep all of theirs.
EDGES = {1: EDGE_GEOMETRIES[1][-1:], 8: EDGE_GEOMETRIES[8], 200: EDGE_GEOMETRIES[200]}
# Fuzz examples: the first two the strategy draws (derandomized, per stage) among those with
# C x outputs <= 512 and block_size >= 4 (no example costs more than one C=512 window; the golden
# and edge cases above cover block sizes 1 and 3, which cost a step per row or two).
FUZZ_EXAMPLES = 2


def _affordable(case) -> bool:
    w = case[0]
    return w.compress_ratio * w.num_outputs <= 512 and w.block_size >= 4

LAUNCHED: dict[str, set[str]] = {}  # stage -> every kernel it launched in this session


def _kernels(stage: str, block_size: int, C: int, state_dtype: torch.dtype, split: bool) -> set[str]:
    return {s.kernel for s in kernel_specializations(stage, block_size, C, state_dtype, split=split)}


def _possible(stage: str, block_size: int, C: int, state_dtype: torch.dtype) -> set[str]:
    """Every kernel ``ascend:<stage>`` may launch for this input (unsplit, and split where it splits)."""
    return _kernels(stage, block_size, C, state_dtype, False) | (
        _kernels(stage, block_size, C, state_dtype, True) if stage in SPLITTING else set())


@pytest.fixture
def launches(monkeypatch, request):
    """The names of the Triton kernels launched through the interpreter during the test; kept
    for the last test's count even when the test fails."""
    from triton.runtime import interpreter

    names: list[str] = []
    original = interpreter.GridExecutor.__call__

    def call(self, *args, **kwargs):
        names.append(self.fn.__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(interpreter.GridExecutor, "__call__", call)
    yield names
    LAUNCHED.setdefault(request.node.callspec.params["stage"], set()).update(names)


def _check_launches(stage: str, launched: list[str], block_size: int, C: int, state_dtype: torch.dtype) -> None:
    assert launched, f"ascend:{stage} launched no Triton kernel"
    possible = _possible(stage, block_size, C, state_dtype)
    assert set(launched) <= possible, f"ascend:{stage} launched {sorted(set(launched) - possible)}, not its own"


# --- golden bytes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("block_size,p", GEOMETRIES)
@pytest.mark.parametrize("stage", STAGES)
def test_golden_bytes(stage, block_size, p, launches):
    kw = golden_inputs(block_size, p)
    got = c128_256_512_compress(**kw, out=kw["kv_cache"].clone(), route=f"ascend:{stage}")
    report = check_cache(check_metadata(**kw, out=None), got, kw["kv_cache"])
    assert report.ok, f"ascend:{stage}, block_size {block_size}: {report}"
    want = _expected_page()
    assert torch.equal(got, want), f"ascend:{stage}, block_size {block_size}: {_first_difference(got, want)}"
    _check_launches(stage, launches, block_size, 128, torch.float32)


# --- window geometry at block edges ---------------------------------------------------------------

@pytest.mark.parametrize("block_size", sorted(EDGES))
@pytest.mark.parametrize("stage", STAGES)
def test_window_at_block_edges(stage, block_size, launches):
    w = _edge_case(128, block_size, EDGES[block_size], seed=block_size)
    report = run_and_check(w, f"ascend:{stage}")
    assert report.num_outputs_written == len(EDGES[block_size])
    _check_launches(stage, launches, block_size, 128, w.state_cache.dtype)


# --- general inputs (the fuzz strategy's first examples) -----------------------------------------

@pytest.mark.parametrize("stage", STAGES)
@settings(max_examples=FUZZ_EXAMPLES, **FUZZ)
@given(case=valid_cases().filter(_affordable))
def test_fuzz_examples(stage, case, launches):
    w, _, inplace = case  # the strategy's drawn route is replaced by this stage
    first = len(launches)  # the fixture's list spans every example
    report = run_and_check(w, f"ascend:{stage}", inplace=inplace)
    assert report.ok
    _check_launches(stage, launches[first:], w.block_size, w.compress_ratio, w.state_cache.dtype)


# --- grids and work split as for 8 vector cores, and for one ------------------------------------

def _vector_cores(monkeypatch, n: int):
    clear = getattr(api, "clear_launch_plans", lambda: None)
    monkeypatch.setenv(VECTOR_CORES_ENV, str(n))
    clear()  # plans are made for the core count of their first call
    yield n
    monkeypatch.delenv(VECTOR_CORES_ENV)
    clear()


@pytest.fixture
def eight_vector_cores(monkeypatch):
    yield from _vector_cores(monkeypatch, 8)


@pytest.fixture
def one_vector_core(monkeypatch):
    yield from _vector_cores(monkeypatch, 1)


# C -> boundary positions: RoPE rows 256; 512 and 1024 (row 0, whose sin is 0, would hide a
# wrong rotation).
VECTOR_CORE_CASES = {128: [300], 512: [700, 1100]}


def _run_vector_core_case(stage: str, C: int, launches: list[str]):
    """One of ``VECTOR_CORE_CASES`` (block size 8) through ``ascend:<stage>``, judged by the oracle."""
    positions = VECTOR_CORE_CASES[C]
    w = _edge_case(C, 8, positions, seed=C)
    report = run_and_check(w, f"ascend:{stage}")
    assert report.num_outputs_written == len(positions)
    _check_launches(stage, launches, 8, C, w.state_cache.dtype)
    return w


@pytest.mark.parametrize("C", sorted(VECTOR_CORE_CASES))
@pytest.mark.parametrize("stage", STAGES)
def test_eight_vector_cores(stage, C, eight_vector_cores, launches):
    w = _run_vector_core_case(stage, C, launches)
    positions = VECTOR_CORE_CASES[C]
    if stage in SPLITTING and plan_split(len(positions), C, eight_vector_cores).split:
        want = _kernels(stage, 8, C, w.state_cache.dtype, True)
        assert want <= set(launches), f"ascend:{stage} with 8 cores did not split: launched {launches}"


@pytest.mark.parametrize("C", sorted(VECTOR_CORE_CASES))
@pytest.mark.parametrize("stage", sorted(SPLITTING))
def test_one_vector_core(stage, C, one_vector_core, launches):
    # One core never splits: the planned rungs run their unsplit kernels. Elsewhere in this folder
    # each program owns its core (the CPU interpreter's grid), so the piece gather's wider tiles
    # split almost every call.
    w = _run_vector_core_case(stage, C, launches)
    want = _kernels(stage, 8, C, w.state_cache.dtype, False)
    assert want <= set(launches), f"ascend:{stage} on one core did not run unsplit: launched {launches}"


# --- every kernel ran -----------------------------------------------------------------------------

def test_every_kernel_of_every_stage_ran(request):
    """Last in this file: every kernel any stage can launch (block sizes 1, 8, 200; C 128 and 512;
    fp32 and bf16 state) ran above under the 3.2 interpreter."""
    if request.config.option.keyword or request.config.option.markexpr:
        pytest.skip("a selection of tests ran; this check needs the whole folder")
    missing = {}
    for stage in STAGES:
        want = set()
        for bs in (1, 8, 200):
            for dtype in (torch.float32, torch.bfloat16):
                want |= _possible(stage, bs, 128, dtype)
        gap = want - LAUNCHED.get(stage, set())
        if gap:
            missing[stage] = sorted(gap)
    assert not missing, f"kernels that never ran under triton-ascend's interpreter: {missing}"
