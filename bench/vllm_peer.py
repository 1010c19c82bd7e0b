"""vLLM's own DeepSeek-V4 compressor kernel as a peer: the same step through both, bytes compared, timed.

    python -m bench.vllm_peer PATH [--cases C128,C4,decode] [--routes auto] [--small]
                               [--device auto|cuda|cpu] [--no-time] [--json OUT.json]

PATH is vLLM's ``fused_compress_quant_cache.py`` (``bench/peers.md`` says which commit and how
to get it). It is loaded from where it lies, its ``vllm`` imports answered by stand-ins put in
``sys.modules`` for the import only; nothing of it is copied here. Its launcher
``compress_norm_rope_store_triton`` runs the kernel ``_fused_kv_compress_norm_rope_insert_sparse_attn``
(head 512: 448 e4m3 NOPE dims with UE8M0 scales, 64 bf16 RoPE dims: vLLM's ``fp8_ds_mla`` slot,
which is our ``kv_format="fp8_e4m3"`` slot).

Each case is one engine step: the same state cache, block table, positions, cos/sin cache and
slot mapping go to ``ascend_kvc.compress_step(..., kv_format="fp8_e4m3", overlap=...)`` and,
converted (``peer_inputs``), to vLLM's launcher; both write a copy of one non-zero cache of pages
of ``P = kv_block_tokens // C`` slots (vLLM's page: a KV block of ``kv_block_tokens`` tokens holds
that many compressed slots). Cases:

- ``C128``: the official C=128 cases run as one step each (every token of every request);
- ``C4``: a prefill chunk of 8192 tokens (2048 outputs), ratio 4 with overlap, block size 8,
  shuffled blocks;
- ``decode``: 64 requests of one token, 8 of them closing a window, ratio 4 with overlap.

Bytes: every written slot of vLLM's cache is classed (``classify_slots``) as ``equal`` to ours,
``ambiguous`` (different, but inside the float64 truth's interval: ``ascend_kvc.oracle``),
``scale_pow2`` (a group's scale exponent one off the contract's exact rule where the group's
amax / 448 lies at a power of two: vLLM takes ``ceil(log2(amax * fl(1/448)))`` in float32, the
contract the least ``e`` with ``448 * 2^e >= amax``; the group's values are then judged at
vLLM's exponent) or ``real``; a byte outside the written slots that changed is real too. Ours is
judged by ``oracle.check_cache``. The exit status is 1 when either has a real difference.

Times (CUDA only): device microseconds per call from CUDA events around each call, the median of
``--reps`` calls after ``--warmup``; ``eager`` (launched from Python) and ``graph`` (one call
captured in a CUDA graph, replayed). A route that cannot be captured gets no graph time, and
the reason. Under ``TRITON_INTERPRET=1`` (CPU) vLLM's fp32 -> bf16 and -> e4m3 casts truncate,
so its CPU bytes are not its GPU bytes: the CPU run checks the plumbing, not vLLM.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import types
from dataclasses import dataclass

import torch

from ascend_kvc.layout import (
    FP8_MAX,
    HEAD_DIM,
    NOPE_DIM,
    NOPE_GROUPS,
    PAYLOAD_BYTES,
    QUANT_GROUP,
    ROPE_DIM,
    SCALE_BIAS,
    SCALE_BYTES,
    SLOT_BYTES,
    page_bytes,
)
from ascend_kvc.workloads import OFFICIAL_CASES, StepWorkload, decode_spans, make_workload, official_step

PEER_MODULE = "vllm.models.deepseek_v4.common.ops.fused_compress_quant_cache"
PEER_FUNCTION = "compress_norm_rope_store_triton"
KV_FORMAT = "fp8_e4m3"
KV_BLOCK_TOKENS = 256  # vLLM's KV block: a page holds kv_block_tokens // C compressed slots
CASE_NAMES = ("C128", "C4", "decode")
SKIP_EVERY = 7  # every 7th token of a step has kv slot -1 (padding): both sides must skip it
POW2_SLACK = 2.0**-20  # relative distance of amax / 448 from a power of two that float32's log2 can blur


# --- loading the peer ------------------------------------------------------------------------------

def _standin_modules() -> dict[str, types.ModuleType]:
    """The ``vllm`` modules the peer file imports, as the least that answers them on a CUDA (not
    ROCm) machine: ``current_platform.is_rocm()`` is False, ``vllm.triton_utils`` hands over
    Triton itself, and the MXFP4 packer (used only by a kernel we never launch) raises."""
    import triton
    import triton.language as tl

    def package(name: str) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__path__ = []  # a package, so that submodules and relative imports resolve
        return m

    mods = {name: package(name) for name in (
        "vllm", "vllm.models", "vllm.models.deepseek_v4", "vllm.models.deepseek_v4.common",
        "vllm.models.deepseek_v4.common.ops")}
    platforms = package("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_rocm=lambda: False, is_cuda=lambda: True)
    utils = types.ModuleType("vllm.triton_utils")
    utils.tl, utils.triton = tl, triton
    indexer = types.ModuleType("vllm.models.deepseek_v4.common.ops.fused_indexer_q")

    def _fp32x2_to_fp4x2(*args, **kwargs):
        raise NotImplementedError("stand-in: the MXFP4 indexer kernel is not part of this comparison")

    indexer._fp32x2_to_fp4x2 = _fp32x2_to_fp4x2
    mods.update({"vllm.platforms": platforms, "vllm.triton_utils": utils, indexer.__name__: indexer})
    return mods


def load_peer(path: str) -> types.ModuleType:
    """Import vLLM's file from ``path`` with the stand-ins in ``sys.modules`` for the import only."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"peer file: no file {path!r} (bench/peers.md says how to get it)")
    standins = _standin_modules()
    saved = {name: sys.modules.get(name) for name in [*standins, PEER_MODULE]}
    sys.modules.update(standins)
    try:
        spec = importlib.util.spec_from_file_location(PEER_MODULE, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[PEER_MODULE] = module
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    if not callable(getattr(module, PEER_FUNCTION, None)):
        raise AttributeError(f"peer file {path!r} defines no {PEER_FUNCTION}")
    return module


# --- converting one step to vLLM's arguments --------------------------------------------------------

def peer_kv_view(kv_cache: torch.Tensor) -> torch.Tensor:
    """Our ``[num_pages, P * 584]`` uint8 cache as vLLM's fp8_ds_mla pages ``[num_pages, P, 584]``
    (the same memory: vLLM reads ``P`` from ``shape[1]`` and the page stride from ``stride(0)``)."""
    if kv_cache.dtype != torch.uint8 or kv_cache.dim() != 2 or kv_cache.shape[1] % SLOT_BYTES:
        raise ValueError(f"kv_cache must be uint8 [num_pages, P * {SLOT_BYTES}], got {kv_cache.dtype} "
                         f"{tuple(kv_cache.shape)}")
    return kv_cache.view(kv_cache.shape[0], kv_cache.shape[1] // SLOT_BYTES, SLOT_BYTES)


def peer_inputs(step: StepWorkload, kv_cache: torch.Tensor) -> dict:
    """Keyword arguments of vLLM's ``compress_norm_rope_store_triton`` for ``step`` writing ``kv_cache``.

    vLLM's state row is ``[kv (state_width) | score (state_width)]`` with ``state_width`` 512, or
    1024 with overlap (``[kv_a | kv_b | score_a | score_b]``, older rows taking the ``_a`` halves):
    our row exactly. Its first ``slot_mapping`` is the state slot of each token (only its sign is
    read); the kv slots travel in ``k_cache_metadata.slot_mapping``. RoPE reads row
    ``(p // C) * C`` of a ``[max_pos, 64]`` cos/sin cache (32 cos, 32 sin), as ours does."""
    b = step.base
    state_slots = step.state_slot_mapping if step.state_slot_mapping is not None else step.kv_slot_mapping
    return dict(
        state_cache=b.state_cache, num_actual=step.num_tokens, token_to_req_indices=step.token_to_req,
        positions=step.positions, slot_mapping=state_slots, block_table=b.block_table, block_size=b.block_size,
        state_width=HEAD_DIM * (2 if b.overlap else 1), cos_sin_cache=b.cos_sin_cache,
        kv_cache=peer_kv_view(kv_cache), k_cache_metadata=types.SimpleNamespace(slot_mapping=step.kv_slot_mapping),
        pdl_kwargs={}, head_dim=HEAD_DIM, rope_head_dim=ROPE_DIM, compress_ratio=step.compress_ratio,
        overlap=b.overlap, use_fp4_cache=False, rms_norm_weight=b.rms_norm_weight, rms_norm_eps=b.rms_norm_eps,
        quant_block=QUANT_GROUP, token_stride=PAYLOAD_BYTES, scale_dim=SCALE_BYTES,
    )


def peer_slot_offsets(slot: int, kv_view: torch.Tensor) -> tuple[int, int, int]:
    """``(page, payload byte, scale byte)`` of ``slot`` in its page, by vLLM's pointer arithmetic
    (``TOKEN_STRIDE = 576``, ``SCALE_DIM = 8``, page block size ``shape[1]``)."""
    P = kv_view.shape[1]
    page, pos = slot // P, slot % P
    return page, pos * PAYLOAD_BYTES, P * PAYLOAD_BYTES + pos * SCALE_BYTES


def peer_window_columns(compress_ratio: int, overlap: bool) -> tuple[list[int], list[int]]:
    """Per window row (oldest first): the state column of its first value and first score, as
    vLLM's kernel addresses them (``head_offset = (row >= C) * 512``, scores ``state_width`` on)."""
    width = HEAD_DIM * (2 if overlap else 1)
    rows = (2 if overlap else 1) * compress_ratio
    head = [(j >= compress_ratio) * HEAD_DIM for j in range(rows)]
    return head, [h + width for h in head]


# --- the cases -----------------------------------------------------------------------------------

def _pages(num_slots: int, P: int) -> int:
    return num_slots // P + 2


def _with_cache(step: StepWorkload, P: int, seed: int) -> StepWorkload:
    """``step`` over a random non-zero cache of pages of ``P`` slots, each of its tokens its own
    slot (shuffled; non-boundary tokens too: the boundary test must leave them out), every
    ``SKIP_EVERY``-th token slot -1."""
    g = torch.Generator().manual_seed(seed)
    T = step.num_tokens
    pages = _pages(T, P)
    dev = step.positions.device
    slots = torch.randperm(pages * P, generator=g)[:T]
    slots[SKIP_EVERY - 1::SKIP_EVERY] = -1  # padding tokens: no output
    slots = slots.to(dev)
    cache = torch.randint(0, 256, (pages, page_bytes(P)), dtype=torch.uint8, generator=g).to(dev)
    return StepWorkload(base=step.base, token_to_req=step.token_to_req, positions=step.positions,
                        kv_slot_mapping=slots, kv_cache=cache, state_slot_mapping=step.state_slot_mapping,
                        name=step.name)


def _spans_step(spans, C: int, overlap: bool, device, seed: int, name: str) -> StepWorkload:
    L = max(first + count for first, count in spans)
    base = make_workload(len(spans), len(spans) * L, C, shuffle=True, seed=seed, device=device,
                         kv_format=KV_FORMAT, overlap=overlap)
    token_to_req = torch.cat([torch.full((n,), r, dtype=torch.int32) for r, (_, n) in enumerate(spans)])
    positions = torch.cat([torch.arange(f, f + n) for f, n in spans])
    return StepWorkload(base=base, token_to_req=token_to_req.to(device), positions=positions.to(device),
                        kv_slot_mapping=positions.to(device), kv_cache=base.kv_cache, name=name)


def build_cases(names: list[str], small: bool, device, kv_block_tokens: int = KV_BLOCK_TOKENS
                ) -> list[tuple[str, StepWorkload]]:
    """The steps of the named cases (``--small``: look-alikes a CPU interpreter runs in seconds)."""
    out = []
    for name in names:
        if name == "C128":
            cases = [(1, 256, 128)] if small else [c for c in OFFICIAL_CASES if c[2] == 128]
            for r, t, C in cases:
                step, _ = official_step(r, t, C, device=device, kv_format=KV_FORMAT, seed=3)
                out.append((f"C128/{step.name}", step))
        elif name == "C4":
            tokens = 32 if small else 8192
            step, _ = official_step(1, tokens, 4, device=device, kv_format=KV_FORMAT, overlap=True, shuffle=True,
                                    seed=5)
            out.append((f"C4/prefill-T{tokens}", step))
        elif name == "decode":
            reqs, closing = (4, 2) if small else (64, 8)
            spans = decode_spans(reqs, closing, 4, context=64)
            out.append((f"decode/R{reqs}-B{closing}-C4",
                        _spans_step(spans, 4, True, device, 7, f"decode-R{reqs}-B{closing}-C4")))
        else:
            raise ValueError(f"cases: unknown {name!r}; known: {', '.join(CASE_NAMES)}")
    return [(label, _with_cache(step, max(1, kv_block_tokens // step.compress_ratio), seed=11 + k))
            for k, (label, step) in enumerate(out)]


def checked_operator_args(step: StepWorkload):
    """The step as the operator's checked arguments (what the oracle takes), its boundary tokens found."""
    from ascend_kvc.step import boundary_tokens

    boundary = boundary_tokens(step.positions, step.kv_slot_mapping, step.compress_ratio, step.state_slot_mapping)
    return step.as_operator(boundary).checked_args()


# --- classing vLLM's bytes ---------------------------------------------------------------------------

@dataclass
class SlotClasses:
    slots: int = 0
    equal: int = 0  # the same 584 bytes as ours
    ambiguous: int = 0  # different from ours, inside the truth's interval
    scale_pow2: int = 0  # a scale exponent one off at a power of two, values right at that exponent
    real: int = 0  # anything else
    unjudged: int = 0  # outputs outside float32's range (the oracle judges placement only)
    first_real: str = ""

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _group_amax_bounds(truth) -> tuple[torch.Tensor, torch.Tensor]:
    """Per group, the least and largest |z| max the truth's intervals allow ([M, 7] each)."""
    lo, hi = truth.z_lo, truth.z_hi
    straddles = (lo <= 0) & (hi >= 0)
    abs_lo = torch.where(straddles, torch.zeros_like(lo), torch.minimum(lo.abs(), hi.abs()))
    abs_hi = torch.maximum(lo.abs(), hi.abs())
    return (abs_lo.view(-1, NOPE_GROUPS, QUANT_GROUP).amax(-1), abs_hi.view(-1, NOPE_GROUPS, QUANT_GROUP).amax(-1))


def _values_ok_at(slot_bytes: torch.Tensor, truth, exponent: torch.Tensor) -> torch.Tensor:
    """[M, 7, 64] whether each e4m3 NOPE value lies in what its z interval quantises to at ``exponent``."""
    from ascend_kvc.oracle import _quantise, _sign_ok, e4m3_value

    q = e4m3_value(slot_bytes[:, :NOPE_DIM]).view(-1, NOPE_GROUPS, QUANT_GROUP)
    q_lo = _quantise(truth.z_lo.view_as(q), exponent, KV_FORMAT)
    q_hi = _quantise(truth.z_hi.view_as(q), exponent, KV_FORMAT)
    return (q >= q_lo) & (q <= q_hi) & _sign_ok(q, q_lo, q_hi)


def pow2_scale_groups(slot_bytes: torch.Tensor, truth) -> torch.Tensor:
    """[M, 7] bool: groups whose written exponent ``e'`` is one off the truth's interval where the
    group's amax sits at the edge between the two (``amax ~ 448 * 2^k`` within ``POW2_SLACK``),
    every value of the group in its interval at ``e'``."""
    e = slot_bytes[:, PAYLOAD_BYTES:PAYLOAD_BYTES + NOPE_GROUPS].to(torch.float64) - SCALE_BIAS
    amax_lo, amax_hi = _group_amax_bounds(truth)
    up = (e == truth.e_hi + 1) & (amax_hi * (1 + POW2_SLACK) >= FP8_MAX * torch.exp2(truth.e_hi))
    down = (e == truth.e_lo - 1) & (amax_lo * (1 - POW2_SLACK) <= FP8_MAX * torch.exp2(truth.e_lo - 1))
    return (up | down) & _values_ok_at(slot_bytes, truth, e).all(dim=-1)


def classify_slots(truth, peer_slots: torch.Tensor, ours_slots: torch.Tensor) -> SlotClasses:
    """Class each written output's slot bytes of the peer (``[M, 584]``, rows as ``truth.outputs``)."""
    from ascend_kvc.oracle import _acceptable, _region

    out = SlotClasses(slots=int(peer_slots.shape[0]))
    if out.slots == 0:
        return out
    equal = (peer_slots == ours_slots).all(dim=1)
    ok = _acceptable(peer_slots, truth)
    pow2 = pow2_scale_groups(peer_slots, truth)  # [M, 7]
    ok_pow2 = ok.clone()
    scale_cols = ok_pow2[:, PAYLOAD_BYTES:PAYLOAD_BYTES + NOPE_GROUPS]
    ok_pow2[:, PAYLOAD_BYTES:PAYLOAD_BYTES + NOPE_GROUPS] = scale_cols | pow2
    nope = ok_pow2[:, :NOPE_DIM].view(-1, NOPE_GROUPS, QUANT_GROUP)
    ok_pow2[:, :NOPE_DIM] = (nope | pow2[:, :, None]).view(-1, NOPE_DIM)
    judged = truth.in_range
    differ = judged & ~equal
    real = differ & ~ok_pow2.all(dim=1)
    out.unjudged = int((~judged).sum())
    out.equal = int((judged & equal).sum())
    out.ambiguous = int((differ & ok.all(dim=1)).sum())
    out.scale_pow2 = int((differ & ~ok.all(dim=1) & ok_pow2.all(dim=1)).sum())
    out.real = int(real.sum())
    if out.real:
        i = int(real.nonzero()[0])
        j = int((~ok_pow2[i]).nonzero()[0])
        out.first_real = (f"output {int(truth.outputs[i])} (slot {int(truth.slots[i])}) byte {j} "
                          f"[{_region(j, KV_FORMAT)}]: vllm {int(peer_slots[i, j])}, ours "
                          f"{int(ours_slots[i, j])}, truth {int(truth.expected[i, j])}")
    return out


def compare_caches(checked, truth, before: torch.Tensor, ours: torch.Tensor, peer: torch.Tensor) -> dict:
    """Byte statistics of one case: the peer's slots classed, bytes either changed outside the
    written slots, and ours judged by the oracle."""
    from ascend_kvc.oracle import check_cache, slot_columns

    page, cols = slot_columns(truth.slots, truth.slots_per_page, KV_FORMAT)
    classes = classify_slots(truth, peer[page, cols], ours[page, cols])
    mask = torch.zeros_like(before, dtype=torch.bool)
    mask[page, cols] = True
    stats = classes.as_dict()
    stats["peer_outside_changed"] = int(((peer != before) & ~mask).sum())
    report = check_cache(checked, ours, before, truth)
    stats["ours_ok"] = bool(report.ok)
    stats["ours_mismatches"] = int(report.mismatches)
    stats["ours_first_mismatch"] = report.first_mismatch
    stats["real"] = classes.real + (stats["peer_outside_changed"] > 0)
    return stats


# --- running and timing ----------------------------------------------------------------------------------

def ours_call(step: StepWorkload, kv_cache: torch.Tensor, route: str, validate: bool = False):
    from ascend_kvc import compress_step

    args = step.args()
    return lambda: compress_step(*args[:7], kv_cache, route=route, validate=validate, **step.kwargs())


def peer_call(module, step: StepWorkload, kv_cache: torch.Tensor):
    fn = getattr(module, PEER_FUNCTION)
    kwargs = peer_inputs(step, kv_cache)
    return lambda: fn(**kwargs)


def resolved_route(step: StepWorkload, route: str) -> str:
    """The route ``route`` runs for this step (``auto`` picks by device and format)."""
    from ascend_kvc import routes

    checked = checked_operator_args(step)
    return routes.for_arguments(route, routes.resolve(route, checked.device), checked).name


FLUSH_BYTES = 256 << 20  # more than any GPU's L2: zeroed between timed calls


def event_us(call, reps: int, warmup: int, flush: bool = True) -> float:
    """Median device microseconds of one call, CUDA events around each of ``reps`` calls; with
    ``flush`` a 256 MiB buffer is zeroed before each (outside the events), so no call finds the
    previous one's bytes in L2 (as ``python -m bench`` and ``bench.versus`` time)."""
    buf = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda") if flush else None
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        if buf is not None:
            buf.zero_()
        s.record()
        call()
        e.record()
    torch.cuda.synchronize()
    return 1e3 * statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def graph_us(call, reps: int, warmup: int, flush: bool = True) -> float:
    """``event_us`` of a CUDA-graph replay of one ``call`` (captured after an eager call)."""
    call()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    return event_us(g.replay, reps, warmup, flush)


def capturable(route_name: str) -> bool:
    """Whether ``compress_step`` on this (resolved) route runs without a host sync, so a CUDA
    graph can hold it: the routes with a device-side step plan."""
    from ascend_kvc.routes import ASCEND_PLANNED_STAGES

    return route_name in ("gpgpu", *(f"ascend:{stage}" for stage in ASCEND_PLANNED_STAGES))


def can_time(device: str) -> bool:
    """CUDA events time device work; on the CPU there is nothing to time."""
    return device == "cuda"


def _timed(fn, call, reps, warmup, flush) -> tuple[float | None, str]:
    try:
        return fn(call, reps, warmup, flush), ""
    except Exception as exc:  # a route that cannot be captured: reported, not fatal
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


# --- the command ---------------------------------------------------------------------------------------

EXAMPLES = """\
examples:
  python -m bench.vllm_peer .peers/vllm/fused_compress_quant_cache.py --json vllm_peer.json
      every case on the GPU, route auto, bytes compared, eager and graph times
  python -m bench.vllm_peer .peers/vllm/fused_compress_quant_cache.py --small --device cpu --no-time
      the plumbing on a CPU, under the Triton interpreter (vLLM's bytes are truncated there)
"""


def build_parser() -> argparse.ArgumentParser:
    from bench.cli import HelpFormatter

    p = argparse.ArgumentParser(prog="python -m bench.vllm_peer", formatter_class=HelpFormatter, epilog=EXAMPLES,
                                description="vLLM's DeepSeek-V4 compressor kernel next to ours on one engine step "
                                            "per case: bytes compared against each other and the oracle, device "
                                            "times (eager and CUDA graph).")
    p.add_argument("path", help="vLLM's fused_compress_quant_cache.py (bench/peers.md)")
    p.add_argument("--cases", default=",".join(CASE_NAMES), help=f"comma-separated, of {', '.join(CASE_NAMES)}")
    p.add_argument("--routes", default="auto", help="our routes, comma-separated")
    p.add_argument("--small", action="store_true", help="tiny look-alike cases (for the CPU interpreter)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="auto: a CUDA GPU if there is one, else the CPU (Triton interpreter)")
    p.add_argument("--no-time", action="store_true", help="compare bytes only")
    p.add_argument("--reps", type=int, default=200, help="timed calls per figure")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls before them")
    p.add_argument("--no-flush", action="store_true", help="time without zeroing 256 MiB before each call (warm L2)")
    p.add_argument("--kv-block-tokens", type=int, default=KV_BLOCK_TOKENS,
                   help="vLLM's KV block in tokens: a page holds this // C slots")
    p.add_argument("--json", metavar="OUT", help="also write every row here")
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    from bench.cli import check_route_or_exit

    p = build_parser()
    a = p.parse_args(argv)
    a.case_names = [c for c in a.cases.split(",") if c]
    unknown = [c for c in a.case_names if c not in CASE_NAMES]
    if unknown or not a.case_names:
        p.error(f"--cases: unknown {', '.join(map(repr, unknown)) or 'empty list'}; known: {', '.join(CASE_NAMES)}")
    a.route_list = check_route_or_exit(p, "--routes", a.routes)
    if a.reps < 1 or a.warmup < 0:
        p.error("--reps must be >= 1 and --warmup >= 0")
    if a.kv_block_tokens < 1:
        p.error("--kv-block-tokens must be >= 1")
    if not os.path.isfile(a.path):
        p.error(f"path: no file {a.path!r} (bench/peers.md says how to get vLLM's file)")
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available here")
    return a


def _fmt(value, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def versions() -> dict:
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__,
            "device_name": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}


def main(argv: list[str] | None = None) -> int:
    from ascend_kvc import RouteUnavailableError

    a = parse(argv)
    if a.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before the peer's kernels are defined
    timing = can_time(a.device) and not a.no_time
    peer = load_peer(a.path)
    info = versions()
    print(f"device {info['device_name']}, torch {info['torch']}, triton {info['triton']}"
          + ("" if timing else "; not timed"), flush=True)
    if a.device == "cpu":
        print("under the Triton interpreter vLLM's fp32 -> bf16 / e4m3 casts truncate: its bytes here are not its "
              "GPU bytes (a plumbing run)", flush=True)
    rows, failed = [], False
    for label, step in build_cases(a.case_names, a.small, a.device, a.kv_block_tokens):
        checked = checked_operator_args(step)
        from ascend_kvc.oracle import compute_truth

        truth = compute_truth(checked)
        before = step.kv_cache.clone()
        peer_cache = before.clone()
        peer_call(peer, step, peer_cache)()
        for route in a.route_list:
            ours_cache = before.clone()
            try:
                ours_call(step, ours_cache, route, validate=True)()
            except RouteUnavailableError as exc:  # a route asked by name that cannot compute this case
                print(f"{label} ours:{route}: unavailable: {exc}", flush=True)
                rows.append({"case": label, "route": route, "mode": "none", "unavailable": str(exc), **info})
                continue
            if a.device == "cuda":
                torch.cuda.synchronize()
            stats = compare_caches(checked, truth, before, ours_cache, peer_cache)
            failed |= stats["real"] > 0 or not stats["ours_ok"]
            ran = resolved_route(step, route)
            print(f"{label} ours:{route} ({ran}) P={step.kv_cache.shape[1] // SLOT_BYTES}: "
                  f"{stats['slots']} slots: {stats['equal']} equal, {stats['ambiguous']} ambiguous, "
                  f"{stats['scale_pow2']} scale at a power of two, {stats['real']} real"
                  + (f" (first: {stats['first_real']})" if stats["first_real"] else "")
                  + (f"; {stats['peer_outside_changed']} bytes outside the slots changed by vllm"
                     if stats["peer_outside_changed"] else "")
                  + ("" if stats["ours_ok"] else f"; OURS FAILS THE ORACLE: {stats['ours_first_mismatch']}"),
                  flush=True)
            modes = [("eager", event_us), ("graph", graph_us)] if timing else [("none", None)]
            for mode, timer in modes:
                row = {"case": label, "route": route, "resolved_route": ran, "mode": mode,
                       "outputs": int(truth.outputs.numel()), "tokens": step.num_tokens,
                       "slots_per_page": step.kv_cache.shape[1] // SLOT_BYTES, "bytes": stats, **info}
                if timer is not None:
                    ours_c = before.clone()
                    if mode == "graph" and not capturable(ran):
                        row["ours_us"], row["ours_error"] = None, f"route {ran!r} syncs with the host: no graph"
                    else:
                        row["ours_us"], row["ours_error"] = _timed(timer, ours_call(step, ours_c, route), a.reps,
                                                                   a.warmup, not a.no_flush)
                    peer_c = before.clone()
                    row["vllm_us"], row["vllm_error"] = _timed(timer, peer_call(peer, step, peer_c), a.reps,
                                                               a.warmup, not a.no_flush)
                    row["ratio"] = (row["vllm_us"] / row["ours_us"]
                                    if row["ours_us"] and row["vllm_us"] else None)
                rows.append(row)
        del checked, truth, before, peer_cache
        if a.device == "cuda":
            torch.cuda.empty_cache()

    if timing:
        print("\n| case | route (ran) | mode | ours us | vllm us | vllm / ours |\n|---|---|---|---|---|---|")
        for r in rows:
            if "unavailable" in r:
                continue
            print(f"| {r['case']} | {r['route']} ({r['resolved_route']}) | {r['mode']} | {_fmt(r['ours_us'], 1)} "
                  f"| {_fmt(r['vllm_us'], 1)} | {_fmt(r['ratio'], 2)} |")
        for mode in ("eager", "graph"):
            for route in a.route_list:
                ratios = [r["ratio"] for r in rows if r["mode"] == mode and r["route"] == route and r.get("ratio")]
                if ratios:
                    gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
                    print(f"{mode}, ours:{route}: vllm / ours over {len(ratios)} cases: geomean {gm:.2f}, "
                          f"min {min(ratios):.2f}, max {max(ratios):.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": a.device, **info, "peer": os.path.abspath(a.path), "small": a.small, "rows": rows},
                      f, indent=1)
    if failed:
        print("a real byte difference (or ours failing the oracle): exit status 1", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
