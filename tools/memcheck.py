"""Memory safety with validate=False: every route on every kind of out-of-range index.

Run under NVIDIA's compute-sanitizer on a GPU, where any read or write outside an allocation is
reported::

    compute-sanitizer --tool memcheck python tools/memcheck.py

Each scenario gives one kind of bad index to some outputs (the others stay valid) and calls a
route with ``validate=False`` on guarded tensors: ``kv_cache`` (written in place) and
``state_cache`` are interior views of larger buffers whose margins hold a pattern (0x5A bytes,
NaN state rows). Afterwards the margins must be untouched, the bad outputs' slots must keep
their bytes and every valid output must hold the float64 truth's bytes (a read of a NaN guard
row would show there). Without a GPU it runs the same kernels under the Triton interpreter
(``--small``, also a test in tests/test_memory_safety.py). ``--steps`` adds ``compress_step``
with bad indices on each device-search route, each way it can find a step's boundary tokens
(``check_step``; tests/test_step.py runs it too).
Exit status 1 if anything failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Callable

GUARD_BYTE = 0x5A
GUARD_PAGES = 2  # kv_cache margin before and after, in pages
GUARD_BLOCKS = 2  # state_cache margin before and after, in blocks


def _guarded(t, fill):
    """``(buffer, view)``: ``view`` equals ``t`` and lies strictly inside ``buffer`` (same row shape)."""
    import torch

    rows = t.shape[0]
    margin = GUARD_PAGES if t.dtype == torch.uint8 else GUARD_BLOCKS
    buf = torch.full((rows + 2 * margin, *t.shape[1:]), fill, dtype=t.dtype, device=t.device)
    view = buf[margin:margin + rows]
    view.copy_(t)
    return buf, view


def _workload(C: int, block_size: int, device: str, seed: int):
    """Two requests, outputs at several window positions, slots shuffled, a non-zero cache."""
    import torch

    from ascend_kvc.workloads import make_workload

    L = C + 3 * block_size + 37
    w = make_workload(2, 2 * L, C, block_size=block_size, shuffle=True, nonzero_cache=True, seed=seed, device=device)
    positions = [C - 1, C + 5, L - 1]
    boundary = [r * L + p for r in range(2) for p in positions]
    num_slots = w.kv_cache.shape[0] * 64
    if num_slots < len(boundary) + 1:
        extra = torch.randint(0, 256, (1, w.kv_cache.shape[1]), dtype=torch.uint8, device=device)
        w.kv_cache = torch.cat([w.kv_cache, extra])
        num_slots += 64
    slots = torch.randperm(num_slots, generator=torch.Generator().manual_seed(seed))[:len(boundary)]
    mapping = torch.full((2 * L,), -1, dtype=torch.int64)
    mapping[boundary] = slots
    w.boundary_token_indices = torch.tensor(boundary, device=device)
    w.kv_slot_mapping = mapping.to(device)
    return w


def _window(w, i):
    tok = int(w.boundary_token_indices[i])
    return tok, int(w.token_to_req[tok]), int(w.positions[tok])


def _scenarios() -> dict[str, Callable]:
    """name -> defect(w): make some outputs invalid in one way."""
    import torch

    def position_too_small(w):
        w.positions[_window(w, 0)[0]] = w.compress_ratio - 2

    def request_one_past(w):
        w.token_to_req[_window(w, 1)[0]] = w.block_table.shape[0]

    def request_negative(w):
        w.token_to_req[_window(w, 1)[0]] = -1

    def slot_one_past(w):
        w.kv_slot_mapping[_window(w, 2)[0]] = w.kv_cache.shape[0] * 64

    def column_past_table(w):
        w.positions[_window(w, 2)[0]] = w.block_table.shape[1] * w.block_size

    def block_one_past(w):
        _, r, p = _window(w, 3)
        w.block_table[r, (p - w.compress_ratio // 2) // w.block_size] = w.state_cache.shape[0]

    def block_negative_first(w):
        _, r, p = _window(w, 4)
        w.block_table[r, (p - w.compress_ratio + 1) // w.block_size] = -3

    def block_far_past_last(w):
        _, r, p = _window(w, 5)
        w.block_table[r, p // w.block_size] = 10**6

    def token_index_one_past(w):
        w.boundary_token_indices[1] = w.token_to_req.shape[0]

    def token_index_negative(w):
        w.boundary_token_indices[2] = -5

    def short_cos_sin_cache(w):
        # Output 2's RoPE row is (p // C) * C; the cache now ends right before it.
        _, _, p = _window(w, 2)
        w.cos_sin_cache = w.cos_sin_cache[: p // w.compress_ratio * w.compress_ratio].clone()

    def empty_cos_sin_cache(w):
        w.cos_sin_cache = w.cos_sin_cache[:0].clone()

    def every_defect_at_once(w):
        for defect in (position_too_small, request_one_past, slot_one_past, block_one_past, block_negative_first):
            defect(w)
        w.boundary_token_indices = torch.cat([w.boundary_token_indices, torch.tensor(
            [w.token_to_req.shape[0], -1], dtype=w.boundary_token_indices.dtype, device=w.kv_cache.device)])

    return {f.__name__: f for f in (
        position_too_small, request_one_past, request_negative, slot_one_past, column_past_table, block_one_past,
        block_negative_first, block_far_past_last, token_index_one_past, token_index_negative,
        short_cos_sin_cache, empty_cos_sin_cache, every_defect_at_once)}


class _Guards:
    """``state_cache`` and ``kv_cache`` copied into guarded buffers (``_guarded``): the views to
    call with, the cache's bytes before the call, and what changed outside the views after it."""

    def __init__(self, state_cache, kv_cache):
        self.state_buf, self.state_cache = _guarded(state_cache, float("nan"))
        self.kv_buf, self.kv_cache = _guarded(kv_cache, GUARD_BYTE)
        self.state_guard = self.state_buf.clone()
        self.before = self.kv_cache.clone()

    def problems(self, device: str) -> list[str]:
        import torch

        if device == "cuda":
            torch.cuda.synchronize()
        problems = []
        kv, margin = self.kv_buf, GUARD_PAGES
        if not (bool((kv[:margin] == GUARD_BYTE).all()) and bool((kv[-margin:] == GUARD_BYTE).all())):
            problems.append("a kv_cache guard byte changed")
        if not torch.equal(self.state_buf.nan_to_num(7.0), self.state_guard.nan_to_num(7.0)):
            problems.append("state_cache changed")
        return problems


def check_scenario(route: str, name: str, defect: Callable, C: int, block_size: int, device: str) -> str:
    """Run one scenario; return "" if everything held, else what went wrong."""
    from ascend_kvc import c128_256_512_compress
    from ascend_kvc.oracle import check_cache
    from ascend_kvc.validation import check_metadata

    w = _workload(C, block_size, device, seed=C + block_size)
    defect(w)
    guards = _Guards(w.state_cache, w.kv_cache)
    w.state_cache = guards.state_cache
    c128_256_512_compress(*w.args(), out=guards.kv_cache, route=route, validate=False)
    problems = guards.problems(device)
    report = check_cache(check_metadata(*w.args(), None), guards.kv_cache, guards.before)
    if not report.ok:
        problems.append(str(report))
    return "; ".join(problems)


# gpgpu's four ways of finding a step's boundary tokens (gpgpu_fallback/route.py), each forced on
# a small step by its route constants: one token a program (a grid of at most
# STEP_PER_TOKEN_PROGRAMS_PER_UNIT programs a unit), searched by every program (steps of up to
# STEP_INLINE_TOKENS tokens), one tile of C tokens a program (few requests), or the list that
# the search writes in a launch of its own (ticket_search; more requests than STEP_TILE_MAX_REQUESTS).
GPGPU_STEP_PATHS = {
    "per-token": dict(STEP_PER_TOKEN_PROGRAMS_PER_UNIT=2**40),
    "inline": dict(STEP_PER_TOKEN_PROGRAMS_PER_UNIT=0),
    "token-tiles": dict(STEP_PER_TOKEN_PROGRAMS_PER_UNIT=0, STEP_INLINE_TOKENS=0),
    "search": dict(STEP_PER_TOKEN_PROGRAMS_PER_UNIT=0, STEP_INLINE_TOKENS=0, STEP_TILE_MAX_REQUESTS=0),
}


# The Ascend rungs' two ways for a step past the search inside the piece gather (ascend_kvc/
# boundaries.py): by token tile (at most TILE_MAX_REQUESTS requests) or the search kernels' list.
ASCEND_STEP_PATHS = {"token-tiles": {}, "search": dict(TILE_MAX_REQUESTS=0)}


@contextlib.contextmanager
def _forced(module, forced: dict):
    """``module``'s constants set to ``forced`` inside, with fresh step plans before and after."""
    from ascend_kvc.step import clear_step_plans

    saved = {name: getattr(module, name) for name in forced}
    clear_step_plans()
    try:
        for name, value in forced.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
        clear_step_plans()


def gpgpu_step_path(path: str | None):
    """Plan gpgpu steps the ``GPGPU_STEP_PATHS[path]`` way (``None``: as the route plans them), with
    fresh step plans before and after."""
    from gpgpu_fallback import route as gpgpu_route

    return _forced(gpgpu_route, GPGPU_STEP_PATHS[path] if path else {})


def step_path(route: str, path: str | None):
    """``gpgpu_step_path`` on ``gpgpu``; on the Ascend routes, their steps planned the
    ``ASCEND_STEP_PATHS[path]`` way."""
    if route == "gpgpu":
        return gpgpu_step_path(path)
    from ascend_kvc import boundaries

    return _forced(boundaries, ASCEND_STEP_PATHS[path] if path else {})


def gpgpu_plan_path(plan) -> str:
    """Which of ``GPGPU_STEP_PATHS`` a gpgpu step plan took."""
    if plan.launcher.constexprs["INLINE_T"]:
        return "inline"
    tile = plan.launcher.constexprs["TOKEN_TILE"]
    return "per-token" if tile == 1 else "token-tiles" if tile else "search"


def ascend_plan_path(plan) -> str:
    """Which way an Ascend route's step plan finds its boundary tokens: ``inline`` (the piece
    gather searches a small step itself), or one of ``ASCEND_STEP_PATHS``."""
    return "inline" if plan.inline_search else "token-tiles" if plan.token_tiles else "search"


def check_step(route: str, device: str, path: str | None = None) -> str:
    """``compress_step`` with ``validate=False`` on a step of two requests (1000 tokens, C=128,
    7 boundary tokens) where four boundary tokens carry a bad index: a request past the table, a
    slot past the cache, a block id past the state cache and a negative one in their windows.
    Returns "" if the margins kept their values, those four wrote nothing and the other three
    hold the truth's bytes, else what went wrong. ``path``: the way an Ascend route's plan must
    have taken (``ASCEND_STEP_PATHS``; ``None``, as planned: by token tile, two requests)."""
    import torch

    from ascend_kvc import compress_step
    from ascend_kvc.oracle import check_cache
    from ascend_kvc.workloads import make_step_workload

    sw = make_step_workload([(0, 700), (60, 300)], 128, block_size=8, seed=97, device=device)
    b = sw.base
    p, s = sw.positions.tolist(), sw.kv_slot_mapping.tolist()
    bnd = [t for t in range(len(p)) if (p[t] + 1) % 128 == 0 and s[t] >= 0]
    if len(bnd) != 7:  # positions 127, 255, 383, 511, 639, then the second request's 127, 255
        return f"the step has {len(bnd)} boundary tokens, meant 7"
    sw.token_to_req[bnd[0]] = b.block_table.shape[0]
    sw.kv_slot_mapping[bnd[1]] = sw.kv_cache.shape[0] * 64
    b.block_table[0, 40] = b.state_cache.shape[0]  # inside position 383's window (blocks 32..47) only
    b.block_table[1, 20] = -3  # inside the second request's position 255 window (blocks 16..31) only
    guards = _Guards(b.state_cache, sw.kv_cache)
    b.state_cache, sw.kv_cache = guards.state_cache, guards.kv_cache
    compress_step(*sw.args(), **sw.kwargs(), route=route, validate=False)
    problems = guards.problems(device)
    if route != "gpgpu":  # which of ASCEND_STEP_PATHS the plan took: by tile, or the search's list
        from ascend_kvc.step import _STEP_PLANS

        taken = [ascend_plan_path(plan) for plan in _STEP_PLANS.values()]
        problems += [f"the step took the {t} path" for t in taken if t != (path or "token-tiles")]
    report = check_cache(sw.as_operator(torch.tensor(bnd, device=device)).checked_args(), sw.kv_cache, guards.before)
    if not report.ok:
        problems.append(str(report))
    elif report.num_outputs_written != 3:
        problems.append(f"{report.num_outputs_written} outputs written, meant 3")
    return "; ".join(problems)


def step_runs() -> list[tuple[str, str]]:
    """``(route, path)`` of ``--steps``: each device-search route each way (``step_path``)."""
    return [*(("gpgpu", path) for path in GPGPU_STEP_PATHS),
            *((route, path) for route in ("ascend", "ascend:fused") for path in ASCEND_STEP_PATHS)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto", help="cuda, cpu (Triton interpreter) or auto")
    parser.add_argument("--small", action="store_true", help="C=128 only, block sizes 8 and 3")
    parser.add_argument("--routes", nargs="*", help="routes to run (default: every route)")
    parser.add_argument("--scenarios", nargs="*", help="scenarios to run (default: all)")
    parser.add_argument("--steps", action="store_true",
                        help="also compress_step with bad indices on each device-search route, each way")
    args = parser.parse_args(argv)

    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel is defined

    from ascend_kvc import ASCEND_STAGES

    routes = args.routes or ["reference", *(f"ascend:{s}" for s in ASCEND_STAGES), "gpgpu"]
    scenarios = _scenarios()
    names = args.scenarios or list(scenarios)
    geometries = [(128, 8), (128, 3)] if args.small else [(C, bs) for C in (128, 256, 512) for bs in (1, 8, 64, 200)]
    failures = 0
    for C, bs in geometries:
        for route in routes:
            for name in names:
                try:
                    problem = check_scenario(route, name, scenarios[name], C, bs, device)
                except Exception as exc:  # an exception with validate=False is itself a failure
                    problem = f"raised {type(exc).__name__}: {exc}"
                if problem:
                    failures += 1
                    print(f"FAIL C={C} block_size={bs} {route} {name}: {problem}", flush=True)
        print(f"C={C} block_size={bs}: {len(routes) * len(names)} runs done", flush=True)
    if args.steps:
        for route, path in step_runs():
            try:
                with step_path(route, path):
                    problem = check_step(route, device, path if route != "gpgpu" else None)
            except Exception as exc:
                problem = f"raised {type(exc).__name__}: {exc}"
            if problem:
                failures += 1
                print(f"FAIL step {route} {path or ''}: {problem}", flush=True)
        print(f"steps: {len(step_runs())} runs done", flush=True)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    # Run as a script from a checkout: import this checkout's package, not an installed copy.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
