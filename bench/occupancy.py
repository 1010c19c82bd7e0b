"""How evenly each Ascend rung's persistent grid shares one call among vector cores: a model.

    python -m bench.occupancy                  # the Markdown table (official cases, 20/24/40/48 cores)
    python -m bench.occupancy --cores 40 48    # other core counts
    python -m bench.occupancy --update-docs    # rewrite docs/ASCEND.md's "occupancy table" block

This is a model of the bytes of compressor state each program reads, not a measurement: it
assumes a vector core's time is proportional to the bytes it reads (the operator is memory
bound), and it leaves out the small reads and writes (indices, the 584-byte slots, the merge of
split windows, the quantise and scatter kernels of ``triton-quant``) and the framework ops of
the lower rungs. ``python -m bench`` measures; this only says how the work is dealt out.

How each rung deals out the work (``ascend_kvc.stages``, ``ascend_kvc.stages.work_split``):

* ``triton-quant`` (the default ``ascend``) and ``fused``, the ``ASCEND_PLANNED_STAGES``: one
  output per work item, or, when that leaves cores idle, the windows laid end to end and cut into
  one run of whole row tiles per program (tiles of the official block size), each run one piece
  per window it touches (``work_split.plan_split``); ``work_split.occupancy`` is the model. With
  one program per vector core, as here, the piece gather's wider tiles split every call.
* every other rung: ``outputs * (512 // BLOCK_D)`` work items of equal size (C rows x BLOCK_D
  of the 512 dims, values and scores), on ``min(cores, work items)`` programs; ``block-d512``
  and ``byte-scatter`` are one output per item. ``pre-gather``'s ``index_select`` (a framework
  op) is left out: only its Triton scan is modelled.

Program ``p`` takes items ``p, p + programs, ...`` in every kernel but the split's piece
gather. ``busy`` is the share of ``cores x the busiest program's bytes`` that holds work (1.0:
every core reads as much as the busiest); ``max/mean`` is the busiest program's bytes over the
mean of the programs launched.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# Vector-core counts the table is computed for (ASCEND_KVC_VECTOR_CORES sizes a grid as for any).
CORE_COUNTS: tuple[int, ...] = (20, 24, 40, 48)
HEAD_DIM = 512  # the pooled dims; a state row holds 512 values then 512 scores
STATE_BYTES = 4  # float32 state, the official dtype (bf16 halves every byte count, no ratio)
ROW_BYTES = 2 * HEAD_DIM * STATE_BYTES  # one window row, values and scores
DOC = Path(__file__).resolve().parent.parent / "docs" / "ASCEND.md"  # where the table is kept
BLOCK_NAME = "occupancy table"


@dataclass(frozen=True)
class OccupancyRow:
    """One (case, cores, rung) of the model."""

    case: str  # "R8-T131072-C512"
    compress_ratio: int
    outputs: int
    cores: int
    stage: str
    split: bool  # the rung plans a window split (it may still keep whole windows)
    items_per_output: int  # work items of one output: 512 // BLOCK_D, or the most pieces of a split window
    pieces: int  # the most window pieces one program reads (split rungs; 1 for the others)
    work_items: int
    programs: int
    busy: float
    max_over_mean: float
    max_bytes: int  # state bytes the busiest program reads
    mean_bytes: float  # state bytes per program launched, on average


def block_d(stage: str) -> int:
    """The dims one work item of ``stage``'s gather covers (its ``BLOCK_D``; 512 for ``fused``)."""
    import torch

    from ascend_kvc.stages import kernel_specializations

    return kernel_specializations(stage, 8, 128, torch.float32)[0].constexprs.get("BLOCK_D", HEAD_DIM)


def _unsplit(outputs: int, C: int, cores: int, items_per_output: int) -> tuple[int, float, float, int, float]:
    """(programs, busy, max/mean, max bytes, mean bytes) of equal items on a persistent grid."""
    items = outputs * items_per_output
    programs = max(1, min(cores, items))
    item_bytes = C * ROW_BYTES // items_per_output
    most = -(-items // programs)  # items of the busiest program (the first items % programs get one more)
    total = items * item_bytes
    mean = total / programs
    busiest = most * item_bytes
    return programs, total / (cores * busiest), busiest / mean, busiest, mean


def occupancy_rows(cases=None, cores: tuple[int, ...] = CORE_COUNTS, stages=None) -> list[OccupancyRow]:
    """The model for every (case, cores, rung): ``cases`` as (num_reqs, total_tokens, C)
    (default: the official ones), ``stages`` in ladder order (default: every rung)."""
    from ascend_kvc.routes import ASCEND_PLANNED_STAGES, ASCEND_STAGES
    from ascend_kvc.stages import piece_row_tile, unsplit_row_tile
    from ascend_kvc.stages.work_split import occupancy, plan_split
    from ascend_kvc.workloads import OFFICIAL_BLOCK_SIZE, OFFICIAL_CASES

    row_unit = piece_row_tile(OFFICIAL_BLOCK_SIZE)  # a split's runs are whole row tiles
    unsplit_tile = unsplit_row_tile(OFFICIAL_BLOCK_SIZE)  # one program per vector core, as on a 910B

    rows = []
    for r, t, C in (OFFICIAL_CASES if cases is None else cases):
        n = t // C
        for k in cores:
            for stage in (ASCEND_STAGES if stages is None else stages):
                if stage in ASCEND_PLANNED_STAGES:
                    split = plan_split(n, C, k, row_unit=row_unit, unsplit_row_tile=unsplit_tile)
                    occ = occupancy(split)
                    rows.append(OccupancyRow(
                        f"R{r}-T{t}-C{C}", C, n, k, stage, True, split.pieces, occ.max_pieces, split.work_items,
                        occ.programs, occ.busy, occ.max_over_mean, occ.max_rows * ROW_BYTES,
                        occ.mean_rows * ROW_BYTES))
                else:
                    per = HEAD_DIM // block_d(stage)
                    programs, busy, mom, most, mean = _unsplit(n, C, k, per)
                    rows.append(OccupancyRow(f"R{r}-T{t}-C{C}", C, n, k, stage, False, per, 1, n * per,
                                             programs, busy, mom, most, mean))
    return rows


def _groups(rows: list[OccupancyRow]) -> list[tuple[OccupancyRow, list[str]]]:
    """Rungs whose grids deal out the same bytes in every (case, cores) of ``rows``, in ladder
    order of their first rung: one column each. Returns (a row of the group, its rungs)."""
    by_stage: dict[str, list[OccupancyRow]] = {}
    for row in rows:
        by_stage.setdefault(row.stage, []).append(row)
    groups: dict[tuple, tuple[OccupancyRow, list[str]]] = {}
    for stage, mine in by_stage.items():
        signature = tuple((r.case, r.cores, r.split, r.items_per_output, r.pieces, r.programs, r.max_bytes,
                           r.mean_bytes) for r in mine)
        groups.setdefault(signature, (mine[0], []))[1].append(stage)
    return list(groups.values())


def _cell(row: OccupancyRow) -> str:
    return f"{row.busy:.2f} · {row.max_over_mean:.2f}"


def format_table(rows: list[OccupancyRow]) -> str:
    """Markdown: one line per (case, cores), one column per group of rungs with "busy · max/mean"
    (the split rungs also with the most window pieces one program reads)."""
    groups = _groups(rows)
    header = ["case", "outputs", "cores"]
    for first, stages in groups:
        names = ", ".join(f"`{s}`" for s in stages)
        if first.split:
            header += [f"{names}: most pieces a program", f"{names}: busy · max/mean"]
        else:
            items = "one output" if first.items_per_output == 1 else f"1/{first.items_per_output} output"
            header.append(f"{names} ({items} per item): busy · max/mean")
    index = {(row.case, row.cores, row.stage): row for row in rows}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for case, cores in dict.fromkeys((row.case, row.cores) for row in rows):
        mine = [index[(case, cores, stages[0])] for _, stages in groups]
        cells = [case, str(mine[0].outputs), str(cores)]
        for row in mine:
            cells += [str(row.pieces), _cell(row)] if row.split else [_cell(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def doc_block(text: str, name: str = BLOCK_NAME) -> str:
    """What lies between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` in ``text``, stripped."""
    m = re.search(rf"<!-- BEGIN {re.escape(name)} -->\n(.*?)<!-- END {re.escape(name)} -->", text, re.S)
    if not m:
        raise ValueError(f"no '{name}' block in the text")
    return m.group(1).strip()


def replace_doc_block(text: str, body: str, name: str = BLOCK_NAME) -> str:
    """``text`` with its ``name`` block replaced by ``body``; raises ValueError without the markers."""
    doc_block(text, name)  # raises when the markers are missing
    return re.sub(rf"(<!-- BEGIN {re.escape(name)} -->\n).*?(<!-- END {re.escape(name)} -->)",
                  lambda m: m.group(1) + body.strip() + "\n" + m.group(2), text, count=1, flags=re.S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.occupancy", description=__doc__.split("\n\n")[0])
    p.add_argument("--cores", type=int, nargs="+", default=list(CORE_COUNTS), help="vector-core counts")
    p.add_argument("--update-docs", action="store_true",
                   help=f"rewrite docs/ASCEND.md's '{BLOCK_NAME}' block with the default table")
    a = p.parse_args(argv)
    if any(k < 1 for k in a.cores):
        p.error("--cores: every count must be >= 1")
    table = format_table(occupancy_rows(cores=tuple(a.cores)))
    if a.update_docs:
        DOC.write_text(replace_doc_block(DOC.read_text(), format_table(occupancy_rows())))
        print(f"updated the '{BLOCK_NAME}' block of {DOC}", file=sys.stderr)
        return 0
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
