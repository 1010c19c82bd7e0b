"""Tile sweep for the gpgpu route on the current CUDA GPU: python -m bench.sweep_gpgpu.

For each official case (shuffled block table, in place), or the cases named (C4: the
overlapping ratio-4 prefill chunk, as python -m bench runs it), it checks every tile set against
the oracle, then times it as a CUDA-graph replay (the GPU time, without host overhead) and eagerly
(do_bench medians, L2 flushed between calls), next to the floor (bytes that must move over the
measured read bandwidth). It ends with the tile sets ranked by their worst graph/floor ratio, per
compress ratio and overall. Results feed gpgpu_fallback/tuning.py by hand.
"""

from __future__ import annotations

import argparse
import json

import torch
import triton.testing

from ascend_kvc import c128_256_512_compress
from ascend_kvc.api import clear_launch_plans
from ascend_kvc.device import device_kind
from ascend_kvc.layout import OVERLAP_RATIO
from ascend_kvc.oracle import check_cache, compute_truth
from ascend_kvc.workloads import OFFICIAL_CASES, make_workload
from bench.machine import machine_info, machine_line, measure_bandwidth
from gpgpu_fallback import tuning


def time_ms(fn) -> float:
    """``do_bench`` median, L2 flushed between calls."""
    return triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])[0]


def graph_ms(call) -> float:
    """``time_ms`` of a CUDA-graph replay of ``call`` (captured after one eager call)."""
    call()  # compile and plan outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    return time_ms(g.replay)


TILE_FORM = "D,ROWS,WARPS,STAGES[,PPU[,MAX_SPLITS[,EVICT_FIRST]]]"


def sweep_workload(case: tuple[int, int, int], device):
    """The case as swept: shuffled blocks, a non-zero cache; ratio 4 is the overlapping
    compressor, as ``python -m bench`` runs it."""
    return make_workload(*case, shuffle=True, nonzero_cache=True, seed=1, device=device,
                         overlap=case[2] == OVERLAP_RATIO)


def build_parser() -> argparse.ArgumentParser:
    from bench.cli import HelpFormatter

    p = argparse.ArgumentParser(prog="python -m bench.sweep_gpgpu", description=__doc__.strip(),
                                formatter_class=HelpFormatter,
                                epilog="examples:\n  python -m bench.sweep_gpgpu --big --json sweep.json\n"
                                       "  python -m bench.sweep_gpgpu --cases 8,131072,512 "
                                       "--tiles 512,16,4,3 512,32,8,2,8,16,1\n"
                                       "  python -m bench.sweep_gpgpu --cases C4 --tiles 512,8,4,2 256,16,2,2\n")
    p.add_argument("--json", metavar="PATH", help="also write the machine facts and every result here")
    p.add_argument("--big", action="store_true", help="only the 131072-token cases")
    p.add_argument("--cases", nargs="+", metavar="R,T,C",
                   help="these cases instead of the official ones (also 'C4': ratio 4 with overlap)")
    p.add_argument("--tiles", nargs="+", metavar=TILE_FORM,
                   help="tile sets (block_d, rows per step, warps, stages, programs per SM, most window pieces, "
                        "1 for evict_first state loads); default: the table's")
    return p


def _tiles_or_exit(parser: argparse.ArgumentParser, items: list[str] | None) -> list:
    sets = []
    for item in items or []:
        try:
            ts = tuple(int(x) for x in item.split(","))
        except ValueError:
            ts = ()
        if not 4 <= len(ts) <= 7 or min(ts[:4]) < 1:
            parser.error(f"--tiles: expected {TILE_FORM}, the first four >= 1; got {item!r}")
        sets.append(ts)
    return sets or [None]


def main(argv: list[str] | None = None) -> int:
    from bench.cli import parse_cases_or_exit, require_cuda_or_exit

    p = build_parser()
    a = p.parse_args(argv)
    chosen = parse_cases_or_exit(p, a.cases)
    sets = _tiles_or_exit(p, a.tiles)
    require_cuda_or_exit(p)
    info = machine_info("cuda")
    info.update(measure_bandwidth("cuda", lambda fn: {"ms": time_ms(fn)}))
    print(machine_line(info))
    print(f"read {info['read_gbs']:.0f} GB/s, copy {info['copy_gbs']:.0f} GB/s", flush=True)
    kind = device_kind(torch.device("cuda"))
    saved = dict(tuning.TILES), dict(tuning.TILES_BY_RATIO)
    results = []
    cases = chosen or OFFICIAL_CASES
    if a.big:
        cases = [c for c in cases if c[1] == 131072]
    for case in cases:
        w = sweep_workload(case, "cuda")
        checked = w.checked_args()
        truth = compute_truth(checked)
        floor_ms = w.bytes_to_move() / info["read_gbs"] / 1e6
        out = w.kv_cache.clone()

        def call():
            c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False, **w.format_kwargs())

        for ts in sets:
            if ts is not None:
                bd, rows, warps, stages, *rest = ts
                ppu, max_splits, evict = (list(rest) + [8, 16, 0][len(rest):])[:3]
                tuning.TILES_BY_RATIO[(kind, w.compress_ratio)] = tuning.GpgpuTiles(
                    block_d=bd, rows_per_step=rows, warps=warps, stages=stages,
                    programs_per_unit=ppu, max_splits=max_splits, evict_first=bool(evict))
            clear_launch_plans()
            used = tuning.tiles_for(kind, w.compress_ratio, w.num_outputs)
            label = [used.block_d, used.rows_per_step, used.warps, used.stages, used.programs_per_unit, used.max_splits,
                     int(used.evict_first)]
            out.copy_(w.kv_cache)
            call()
            report = check_cache(checked, out, w.kv_cache, truth)
            row = {"case": w.name, "tiles": label, "ok": report.ok, "floor_ms": floor_ms}
            if report.ok:
                row["graph_ms"] = graph_ms(call)
                row["eager_ms"] = time_ms(call)
                print(f"{w.name} tiles {label}: graph {row['graph_ms'] * 1e3:.1f} us "
                      f"({row['graph_ms'] / floor_ms:.2f}x floor {floor_ms * 1e3:.1f} us), "
                      f"eager {row['eager_ms'] * 1e3:.1f} us ({row['eager_ms'] / row['graph_ms']:.2f}x graph)",
                      flush=True)
            else:
                print(f"{w.name} tiles {label}: FAILED {report}", flush=True)
            results.append(row)
        tuning.TILES.clear(), tuning.TILES.update(saved[0])
        tuning.TILES_BY_RATIO.clear(), tuning.TILES_BY_RATIO.update(saved[1])
        clear_launch_plans()
        del w, checked, truth, out
        torch.cuda.empty_cache()
    by_set: dict = {}
    for r in results:
        ratio = r["graph_ms"] / r["floor_ms"] if r["ok"] else float("inf")
        by_set.setdefault((r["case"].rsplit("-C", 1)[1], tuple(r["tiles"])), []).append(ratio)
    for (c, tiles), ratios in sorted(by_set.items(), key=lambda kv: (kv[0][0], max(kv[1]))):
        print(f"C={c} tiles {list(tiles)}: worst graph/floor {max(ratios):.2f}x, per case "
              + " ".join(f"{x:.2f}" for x in ratios))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
