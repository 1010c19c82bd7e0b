"""Ascend lowering audit: lower every Ascend-route kernel with triton-ascend's front end, on CPU.

    python -m tools.ascend_lowering            # table; exit 1 if a kernel fails or overflows the UB
    python -m tools.ascend_lowering --json out.json

triton-ascend 3.2.0 and community Triton both install the package ``triton``, so the lowering
runs in a child process whose ``PYTHONPATH`` puts ``.ascend-triton/`` (``make`` installs it there)
first; torch comes from the normal environment. The child compiles each kernel for an
``Ascend910B3`` target: Triton IR, then ``triton-adapter-opt`` (Triton IR -> Linalg/HIVM), and
stops at ``bishengir-compile``, which needs CANN. The Linalg module it leaves in the Triton cache
(``*.ttadapter``) is what this tool reads:

- a failure inside ``triton-adapter-opt`` means the kernel would not compile for Ascend at all;
- ``scf.for ... {ExtractedLoadOrStore}`` loops and ``DiscreteMemAccess`` attributes are accesses
  turned into scalar loops;
- ``memref.copy`` into a local ``memref.alloc`` is a DMA tile copy (shape and bytes reported);
- the sum of the static ``memref.alloc`` sizes estimates the unified-buffer footprint (192 KiB a
  vector core, 96 KiB usable with double buffering).

It proves the front end accepts the kernels and shows the data-movement pattern; it cannot prove
the final compile (bishengir, CANN) or anything about speed.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ascend_kvc.layout import PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE

REPO = Path(__file__).resolve().parent.parent
UB_BYTES = 192 * 1024
UB_DOUBLE_BUFFERED = UB_BYTES // 2
TARGET_ARCH = "Ascend910B3"
OFFICIAL_RATIOS = (128, 256, 512)
BLOCK_SIZE = 8  # the official workloads' block size; tiles are [BLOCK_BS, BLOCK_D]

# stage -> (module, kernel, constexprs); the byte-scatter rung adds the scatter kernel.
_GATHER = "_block_gather_softmax_kernel"
STAGE_KERNELS = {
    "random-gather": [("ascend_kvc.gather_random", "_random_gather_softmax_kernel", dict(BLOCK_D=64, BLOCK_T=32))],
    "pre-gather": [("ascend_kvc.gather_pregather", "_linear_scan_softmax_kernel", dict(BLOCK_D=64, BLOCK_T=32))],
    "block-gather": [("ascend_kvc.gather_block", _GATHER, dict(BLOCK_D=64, UNMASKED_MIDDLE=False, FUSE_RMSNORM=False))],
    "block-gather-nomask": [("ascend_kvc.gather_block", _GATHER, dict(BLOCK_D=64, UNMASKED_MIDDLE=True, FUSE_RMSNORM=False))],
    "block-d128": [("ascend_kvc.gather_block", _GATHER, dict(BLOCK_D=128, UNMASKED_MIDDLE=True, FUSE_RMSNORM=False))],
    "block-d256": [("ascend_kvc.gather_block", _GATHER, dict(BLOCK_D=256, UNMASKED_MIDDLE=True, FUSE_RMSNORM=False))],
    "block-d512": [("ascend_kvc.gather_block", _GATHER, dict(BLOCK_D=512, UNMASKED_MIDDLE=True, FUSE_RMSNORM=True))],
    "byte-scatter": [
        ("ascend_kvc.gather_block", _GATHER, dict(BLOCK_D=512, UNMASKED_MIDDLE=True, FUSE_RMSNORM=True)),
        ("ascend_kvc.scatter", "_byte_scatter_kernel",
         dict(PAYLOAD_BYTES=PAYLOAD_BYTES, SCALE_BYTES=SCALE_BYTES, SCALE_REGION=SCALE_REGION,
              SLOTS_PER_PAGE=SLOTS_PER_PAGE)),
    ],
}

# Pointer element types the route passes (official dtypes); every other *_ptr is int64.
_POINTER_TYPES = {
    "state_ptr": "*fp32", "rows_ptr": "*fp32", "pooled_ptr": "*fp32", "weight_ptr": "*bf16",
    "block_table_ptr": "*i32", "token_to_req_ptr": "*i32", "payload_ptr": "*u8", "scales_ptr": "*u8",
    "kv_cache_ptr": "*u8",
}
_FLOAT_ARGS = {"eps": "fp32"}
# Unit strides the JIT specialises as constants at run time for contiguous tensors.
_UNIT_STRIDES = {"state_s2": 1, "bt_s1": 1}


@dataclass
class Copy:
    shape: str
    bytes: int
    depth: int  # scf.for nesting depth of the copy
    in_scalar_loop: bool


@dataclass
class KernelReport:
    stage: str
    kernel: str
    C: int
    block_d: int | None
    lowered: bool
    error: str = ""
    scalar_loops: int = 0  # scf.for marked ExtractedLoadOrStore
    scalar_loops_in_hot_loop: int = 0  # of those, inside the per-output window loop
    discrete_accesses: int = 0  # DiscreteMemAccess attributes
    table_loads_in_hot_loop: int = 0  # scalar memref.load in the window loop, outside scalar loops
    copies: list[Copy] = field(default_factory=list)
    bytes_per_scalar_access: float | None = None  # window-loop DMA bytes per scalar access
    footprint_bytes: int = 0  # sum of static memref.alloc sizes (an upper bound: not all live at once)

    @property
    def fits_ub(self) -> bool:
        return self.footprint_bytes <= UB_BYTES

    @property
    def fits_double_buffered(self) -> bool:
        return self.footprint_bytes <= UB_DOUBLE_BUFFERED


# ---------------------------------------------------------------- reading a Linalg module

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


# ---------------------------------------------------------------- lowering (child process)

def _signature(fn, constexprs: dict) -> tuple[dict, dict]:
    sig, const = {}, {}
    for name, p in inspect.signature(fn).parameters.items():
        if name in constexprs or name in _UNIT_STRIDES:
            sig[name] = "constexpr"
            const[name] = constexprs.get(name, _UNIT_STRIDES.get(name))
        elif name in _POINTER_TYPES:
            sig[name] = _POINTER_TYPES[name]
        elif name.endswith("_ptr"):
            sig[name] = "*i64"
        else:
            sig[name] = _FLOAT_ARGS.get(name, "i32")
    return sig, const


def _lower_one(module: str, kernel: str, constexprs: dict) -> tuple[bool, str, str]:
    """Lower one specialisation; returns ``(lowered, error, linalg_text)``."""
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(importlib.import_module(module), kernel)
    params = inspect.signature(fn.fn).parameters
    constexprs = {k: v for k, v in constexprs.items() if k in params}
    sig, const = _signature(fn.fn, constexprs)
    cache = tempfile.mkdtemp(prefix="ascend-audit-")
    os.environ["TRITON_CACHE_DIR"] = cache
    error = ""
    try:
        triton.compile(ASTSource(fn=fn, signature=sig, constants=const), target=GPUTarget("npu", TARGET_ARCH, 0))
    except Exception as exc:  # expected: bishengir-compile needs CANN; anything earlier is a failure
        error = f"{type(exc).__name__}: {exc}"
    found = list(Path(cache).glob("*/*.ttadapter"))
    if not found:
        return False, error.strip()[:2000] or "no Linalg module produced", ""
    return True, "", found[0].read_text()


def _worker() -> int:
    reports = []
    seen = set()
    for stage, kernels in STAGE_KERNELS.items():
        for module, kernel, cx in kernels:
            for C in OFFICIAL_RATIOS if kernel != "_byte_scatter_kernel" else (None,):
                constexprs = dict(cx)
                if C is not None:
                    constexprs.update(C=C, BLOCK_BS=BLOCK_SIZE, ROWS_PADDED=False)
                key = (kernel, json.dumps(constexprs, sort_keys=True))
                lowered, error, text = _lower_one(module, kernel, constexprs)
                rep = KernelReport(stage, kernel, C or 0, cx.get("BLOCK_D"), lowered, error)
                if lowered:
                    for k, v in analyse_linalg(text, hot_depth=1 if C is None else 2).items():
                        setattr(rep, k, v)
                rep_d = asdict(rep)
                rep_d["repeat_of_earlier_stage"] = key in seen
                seen.add(key)
                reports.append(rep_d)
    json.dump(reports, sys.stdout)
    return 0


# ---------------------------------------------------------------- parent: run, print, judge

def ascend_triton_path() -> Path:
    return Path(os.environ.get("ASCEND_TRITON_PATH", REPO / ".ascend-triton"))


def run_audit() -> list[dict]:
    """Lower every kernel in a child process with triton-ascend first on PYTHONPATH."""
    side = ascend_triton_path()
    if not (side / "triton").is_dir():
        raise RuntimeError(f"triton-ascend not found in {side}; `make audit` (or `make test`) installs it there")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(side), str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "tools.ascend_lowering", "--worker"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"audit worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def problems(reports: list[dict]) -> list[str]:
    out = []
    for r in reports:
        name = f"{r['stage']} {r['kernel']} C={r['C']}"
        if not r["lowered"]:
            out.append(f"{name}: did not lower: {r['error'][:300]}")
        elif r["footprint_bytes"] > UB_BYTES:
            out.append(f"{name}: allocations {r['footprint_bytes']} B exceed the {UB_BYTES} B unified buffer")
    return out


def format_table(reports: list[dict]) -> str:
    head = ["stage", "kernel", "C", "BLOCK_D", "lowered", "scalar loops (hot)", "table loads (hot)",
            "hot-loop tile copies", "B / scalar access", "UB alloc KiB"]
    rows = []
    for r in reports:
        if r.get("repeat_of_earlier_stage"):
            continue
        hot = [c for c in r["copies"] if c["depth"] >= (1 if r["C"] == 0 else 2) and not c["in_scalar_loop"]]
        scal = [c for c in r["copies"] if c["in_scalar_loop"]]
        tiles = sorted({f"{c['shape']} ({c['bytes'] // 1024 if c['bytes'] >= 1024 else c['bytes']}"
                        f"{' KiB' if c['bytes'] >= 1024 else ' B'})" for c in hot})
        if scal:
            tiles.append(f"{len(scal)} copies of {scal[0]['shape']} in scalar loops")
        bpa = r["bytes_per_scalar_access"]
        rows.append([
            r["stage"], r["kernel"].strip("_").replace("_kernel", ""), str(r["C"] or "-"), str(r["block_d"] or "-"),
            "yes" if r["lowered"] else "NO",
            f"{r['scalar_loops']} ({r['scalar_loops_in_hot_loop']})", str(r["table_loads_in_hot_loop"]),
            ", ".join(tiles) or "-", f"{bpa:.0f}" if bpa else "-",
            f"{r['footprint_bytes'] / 1024:.1f}" + ("" if r["footprint_bytes"] <= UB_DOUBLE_BUFFERED else " (!)"),
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.ascend_lowering", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", metavar="PATH", help="write the full per-kernel report")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        return _worker()
    reports = run_audit()
    print(f"triton-ascend front end, target {TARGET_ARCH}, block_size {BLOCK_SIZE}, fp32 state; "
          "(!) = over the 96 KiB double-buffered budget")
    print(format_table(reports))
    if a.json:
        Path(a.json).write_text(json.dumps(reports, indent=1))
    bad = problems(reports)
    for line in bad:
        print("FAIL:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
