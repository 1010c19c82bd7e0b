"""The audit's verdict and its tables."""

from __future__ import annotations

from collections import defaultdict

from ascend_kvc.layout import HEAD_DIM

from . import matrix as mx
from .toolchain import CODEGEN, TARGET_ARCH, UB_BITS_910B


def short_kernel(name: str) -> str:
    return name.strip("_").removesuffix("_kernel")


def tile(spec: dict) -> str:
    """``ROWSxDIMS`` of the state tile a gather loads per step (a kernel without ``BLOCK_D`` owns
    the whole head); ``-`` for kernels that load no state tile."""
    cx = spec["constexprs"]
    rows = cx.get("ROW_TILE", cx.get("BLOCK_BS", cx.get("BLOCK_T")))
    return "-" if rows is None else f"{rows}x{cx.get('BLOCK_D', HEAD_DIM)}"


def entry_name(e: dict) -> str:
    return f"{e['stage']} C={e['C']} block_size={e['block_size']} {e['state_dtype']}"


def problems(report: dict) -> list[str]:
    """One line per failing specialisation, in matrix order, naming the entries it serves; and gaps."""
    res = report["results"]
    users: dict[str, list[str]] = defaultdict(list)
    for e in report["entries"]:
        for k in e["kernels"]:
            users[k].append(entry_name(e))
    out = []
    for e in report["entries"]:
        if not e["kernels"]:
            out.append(f"{entry_name(e)}: no kernels to audit")
    for key in users:  # first use in matrix order
        r = res[key]
        if r["front_end"] and r["compiler"] == CODEGEN:
            continue
        spec = r.get("spec", {})
        what = (f"{short_kernel(spec.get('kernel', '?'))} {spec.get('constexprs', {})} "
                f"{spec.get('pointer_types', {}).get('state_ptr', '')}").rstrip()
        if not r["front_end"]:
            why = f"front end failed: {r['front_end_error'][:400]}"
        else:
            why = f"910B compiler: {r['compiler_message'][:400] or r['compiler']}"
            if r.get("largest_ub_buffers"):
                why += f"; largest buffers: {'; '.join(r['largest_ub_buffers'])}"
        where = users[key]
        more = f" (+{len(where) - 1} more)" if len(where) > 1 else ""
        out.append(f"{where[0]}{more}: {what}: {why}")
    return out


def _kib(bits: int | None) -> str:
    return "?" if bits is None else f"{bits / 8 / 1024:.0f}"


def _cell(results: list[dict]) -> str:
    """Planned UB KiB per state dtype (fp32/bf16), a ``!`` after any that did not compile."""
    parts = []
    for r in results:
        mark = "" if r["front_end"] and r["compiler"] == CODEGEN else ("!FE" if not r["front_end"] else "!")
        parts.append(_kib(r["ub_bits"]) + mark)
    return "/".join(parts)


def _verdict(results: list[dict], what: str) -> str:
    if what == "front":
        bad = [r for r in results if not r["front_end"]]
        return "ok" if not bad else f"FAILED {len(bad)}/{len(results)}"
    bad = [r for r in results if r["compiler"] != CODEGEN]
    if not bad:
        return "code generation reached"
    kinds = sorted({r["compiler"] for r in bad})
    return f"{', '.join(kinds).upper()} {len(bad)}/{len(results)}"


def _ranges(values: list[int]) -> str:
    if values == list(mx.BLOCK_SIZES):
        return "all"
    return ",".join(str(v) for v in values)


def format_table(report: dict) -> str:
    """Per stage x kernel, block sizes with the same outcome grouped: planned UB KiB for C=4/128/256/512
    ('-' where a stage is not compiled at that C)."""
    res = report["results"]
    by = {(e["stage"], e["C"], e["block_size"], e["state_dtype"]): e["kernels"] for e in report["entries"]}
    dtypes = [mx.dtype_name(d) for d in mx.STATE_DTYPES]
    head = ["stage", "kernel", "block_size", "tile", *[f"C={c} UB KiB" for c in mx.ALL_RATIOS],
            "front end", "910B compiler"]
    rows = []
    for stage in mx.stages():
        n_kernels = max(len(by.get((stage, c, bs, dt), ())) for c in mx.ALL_RATIOS for bs in mx.BLOCK_SIZES
                        for dt in dtypes)
        for ki in range(n_kernels):
            groups: list[tuple[tuple, list[int]]] = []
            for bs in mx.BLOCK_SIZES:
                cells, every, tiles, name = [], [], set(), ""
                for c in mx.ALL_RATIOS:
                    rs = [res[by[(stage, c, bs, dt)][ki]] for dt in dtypes if ki < len(by.get((stage, c, bs, dt), ()))]
                    cells.append(_cell(rs) if (stage, c, bs, dtypes[0]) in by else "-")
                    every += rs
                    for r in rs:
                        tiles.add(tile(r["spec"]))
                        name = short_kernel(r["spec"]["kernel"])
                row_key = (name, "/".join(sorted(tiles)), *cells, _verdict(every, "front"), _verdict(every, "compiler"))
                if groups and groups[-1][0] == row_key:
                    groups[-1][1].append(bs)
                else:
                    groups.append((row_key, [bs]))
            for key, sizes in groups:
                rows.append([stage, key[0], _ranges(sizes), *key[1:]])
    return _render(head, rows) + (
        f"\nUB KiB: the 910B compiler's planned unified buffer for fp32/bf16 state (PlanMemory; "
        f"{UB_BITS_910B // 8 // 1024} KiB available); '!' = did not compile, '!FE' = front end failed.")


def format_data_movement(report: dict, block_size: int = 8, state_dtype: str = "float32") -> str:
    """What the front end made of the data movement (Linalg), at one block size and dtype."""
    res = report["results"]
    head = ["stage", "kernel", "C", "tile", "scalar loops (hot)", "table loads (hot)", "hot-loop tile copies",
            "B / scalar access", "alloc sum KiB (info)"]
    rows = []
    for e in report["entries"]:
        if e["block_size"] != block_size or e["state_dtype"] != state_dtype:
            continue
        for key in e["kernels"]:
            r = res[key]
            a = r["analysis"]
            if a is None:
                rows.append([e["stage"], short_kernel(r["spec"]["kernel"]), str(e["C"]), tile(r["spec"]),
                             "front end failed", "", "", "", ""])
                continue
            hot_depth = r["spec"]["hot_depth"]
            hot = [c for c in a["copies"] if c["depth"] >= hot_depth and not c["in_scalar_loop"]]
            scal = [c for c in a["copies"] if c["in_scalar_loop"]]
            tiles = sorted({f"{c['shape']} ({c['bytes'] // 1024 if c['bytes'] >= 1024 else c['bytes']}"
                            f"{' KiB' if c['bytes'] >= 1024 else ' B'})" for c in hot})
            if scal:
                tiles.append(f"{len(scal)} copies of {scal[0]['shape']} in scalar loops")
            bpa = a["bytes_per_scalar_access"]
            rows.append([e["stage"], short_kernel(r["spec"]["kernel"]), str(e["C"]), tile(r["spec"]),
                         f"{a['scalar_loops']} ({a['scalar_loops_in_hot_loop']})", str(a["table_loads_in_hot_loop"]),
                         ", ".join(tiles) or "-", f"{bpa:.0f}" if bpa else "-", f"{a['footprint_bytes'] / 1024:.1f}"])
    return _render(head, _merge_ratios(rows))


def _merge_ratios(rows: list[list[str]]) -> list[list[str]]:
    """One row for the ratios (column 2) whose other columns agree."""
    merged: dict[tuple, list[str]] = {}
    for row in rows:
        key = (*row[:2], *row[3:])
        if key in merged:
            merged[key][2] += f",{row[2]}"
        else:
            merged[key] = list(row)
    return list(merged.values())


def _render(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    return "\n".join(lines)
