"""Reading a Linalg module (the ``.ttadapter`` triton-ascend's front end leaves in its cache).

- ``scf.for ... {ExtractedLoadOrStore}`` loops and ``DiscreteMemAccess`` attributes are accesses the
  front end turned into scalar loops;
- ``memref.copy`` into a local ``memref.alloc`` is a DMA tile copy (shape and bytes reported);
- the sum of the static ``memref.alloc`` sizes is reported for information only: whether a kernel
  fits the unified buffer is the 910B compiler's call (its memory plan reuses buffers and adds
  multi-buffer copies), not this sum's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Copy:
    shape: str
    bytes: int
    depth: int  # scf.for nesting depth of the copy
    in_scalar_loop: bool


_DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "i1": 1}
_MEMREF = re.compile(r"memref<([0-9?x]+)x(f32|f16|bf16|i64|i32|i16|i8|i1)")
_ASSIGN = re.compile(r"^\s*(%[\w.]+)(?::\d+)? = ")
_CONST = re.compile(r"(%c\d+)(?:_i\d+)? = arith.constant (\d+) : ")


def _shape_bytes(dims: str, dtype: str) -> int | None:
    n = 1
    for d in dims.split("x"):
        if d == "?":
            return None
        n *= int(d)
    return n * _DTYPE_BYTES[dtype]


def analyse_linalg(text: str, hot_depth: int = 2) -> dict:
    """Scalarised accesses, DMA tile copies and allocations of one ``*.ttadapter`` module.

    Loop depth counts ``scf.for`` nesting. The per-output window loop of the gathers sits at
    ``hot_depth`` (inside the persistent loop over outputs); the scatter has no inner loop, so
    its hot region is the persistent loop itself (``hot_depth=1``).
    """
    consts = {m.group(1): int(m.group(2)) for m in _CONST.finditer(text)}
    allocs: dict[str, tuple[str, str]] = {}
    views: dict[str, str] = {}
    loops: list[tuple[int, bool, int]] = []  # (indent, scalar loop?, trip count)
    footprint = 0
    out = {"scalar_loops": 0, "scalar_loops_in_hot_loop": 0, "discrete_accesses": 0,
           "table_loads_in_hot_loop": 0, "copies": []}
    hot_bytes = 0
    hot_scalar = 0
    lines = text.splitlines()
    for idx, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        while loops and stripped.startswith("}") and indent <= loops[-1][0]:
            loops.pop()
            break
        depth = len(loops)
        in_scalar = any(s for _, s, _ in loops)
        trips = 1
        for _, s, t in loops:
            if s:
                trips *= t
        out["discrete_accesses"] += stripped.count("DiscreteMemAccess")
        m = _ASSIGN.match(line)
        if "memref.alloc()" in stripped and m:
            mm = _MEMREF.search(stripped)
            if mm:
                allocs[m.group(1)] = (mm.group(1), mm.group(2))
                footprint += _shape_bytes(mm.group(1), mm.group(2)) or 0
        elif "memref.subview" in stripped and m:
            base = re.search(r"memref.subview (%[\w.]+)\[", stripped)
            if base:
                views[m.group(1)] = base.group(1)
        if stripped.startswith("scf.for") or " = scf.for " in stripped:
            scalar = _loop_is_scalar(lines, idx, indent)
            trip = _trip_count(stripped, consts)
            if scalar:
                out["scalar_loops"] += 1
                if depth >= hot_depth:
                    out["scalar_loops_in_hot_loop"] += 1
            loops.append((indent, scalar, trip))
            continue
        if stripped.startswith("memref.copy"):
            # Size from the copy's own type when static, else from the local buffer it fills.
            dst = re.match(r"memref.copy (%[\w.]+), (%[\w.]+)", stripped).group(2)
            mm = _MEMREF.search(stripped.split(" : ", 1)[-1])
            shape, dtype = (mm.group(1), mm.group(2)) if mm else ("?", "i8")
            if _shape_bytes(shape, dtype) is None:
                shape, dtype = allocs.get(views.get(dst, dst), (shape, dtype))
            nbytes = _shape_bytes(shape, dtype) or 0
            out["copies"].append(Copy(f"{shape}x{dtype}", nbytes, depth, in_scalar))
            if depth >= hot_depth:
                hot_bytes += nbytes * trips
        if depth >= hot_depth and "memref.load" in stripped:
            if in_scalar:
                hot_scalar += trips
            else:
                out["table_loads_in_hot_loop"] += 1
                hot_scalar += 1
        if depth >= hot_depth and in_scalar and "tensor.extract" in stripped and "DiscreteMemAccess" in stripped:
            hot_scalar += trips
    out["footprint_bytes"] = footprint
    out["bytes_per_scalar_access"] = hot_bytes / hot_scalar if hot_scalar else None
    return out


def _loop_is_scalar(lines: list[str], start: int, indent: int) -> bool:
    """Whether the scf.for opened at ``lines[start]`` closes with ``{ExtractedLoadOrStore ...}``."""
    for line in lines[start + 1 :]:
        if line.strip().startswith("}") and len(line) - len(line.lstrip()) == indent:
            return "ExtractedLoadOrStore" in line
    return False


def _trip_count(line: str, consts: dict[str, int]) -> int:
    m = re.search(r"= (%[\w]+) to (%[\w]+) step (%[\w]+)", line)
    if not m:
        return 1
    lo, hi, step = (consts.get(v) for v in m.groups())
    if None in (lo, hi, step) or step == 0:
        return 1
    return max(1, (hi - lo) // step)
