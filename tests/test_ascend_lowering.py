"""The Ascend lowering audit (tools/ascend_lowering) on the real tool chain: triton-ascend's front
end, then bishengir-compile (ascendnpu-ir) up to CANN's code generator.

``make test`` installs both into .ascend-triton/; without them these tests skip, except in CI,
where a missing install is a failure.
"""

import json
from collections import Counter

import pytest

from ascend_kvc import ASCEND_STAGES
from ascend_kvc.layout import HEAD_DIM, PAYLOAD_BYTES, SCALE_BYTES
from tools import ascend_lowering as audit
from tools.ascend_lowering import matrix as mx
from tools.ascend_lowering import analyse, probe
from tools.ascend_lowering.driver import build_dir
from tools.ascend_lowering.toolchain import largest_buffers, planned_ub_bits

SCATTER = mx.SCATTER_KERNEL
SCALAR_GATHER_STAGES = ("random-gather", "pre-gather")
# Kernels that read no window: the scatter, the quantise kernel, the merges of a split window.
NOT_GATHERS = (SCATTER, "_quantize_bf16_kernel", "_merge_to_slot_kernel", "_merge_to_bf16_kernel")
# The step's boundary search reads token metadata, no window: its own test checks its lowering.
SEARCH = mx.SEARCH_KERNELS
_ELEMENT = {"float32": ("f32", 4), "bfloat16": ("bf16", 2)}

# make audit runs the tests marked audit on the whole matrix (make test: the quick scope)
pytestmark = pytest.mark.audit


@pytest.fixture
def report(audit_report):
    return audit_report


def _uses(report):
    """(matrix entry, result) for every kernel of every entry."""
    return [(e, report["results"][k]) for e in report["entries"] for k in e["kernels"]]


def test_matrix_is_complete(report):
    stages = mx.stages()
    assert set(ASCEND_STAGES) <= set(stages)
    cells = Counter((e["stage"], e["C"], e["block_size"], e["state_dtype"]) for e in report["entries"])
    planned = ("triton-quant", "fused")

    def ratios(stage):  # the planned rungs at compress_ratio 4 too; their overlap stages at 4 only
        parts = stage.split("/")
        return (4,) if "overlap" in parts else (4, 128, 256, 512) if parts[0] in planned else (128, 256, 512)

    if report["scope"] == "full":
        expected = {(s, c, bs, mx.dtype_name(dt)) for s in stages for c in ratios(s)
                    for bs in (1, 3, 8, 16, 32, 64, 128, 256) for dt in mx.STATE_DTYPES}
    else:  # quick (make test): every stage once, at C=128 (the overlap stages at 4), block size 64
        assert report["scope"] == "quick"
        expected = {(s, 4 if "overlap" in s.split("/") else 128, 64, "float32") for s in stages}
    assert set(cells) == expected and set(cells.values()) == {1}
    # the overlapping compressor on every variant of both planned rungs, each kernel specialised for it
    overlap = {s for s in stages if "overlap" in s.split("/")}
    assert {s.replace("/overlap", "") for s in overlap} == {s for s in stages if s.split("/")[0] in planned} - overlap
    for e in report["entries"]:
        flags = {report["results"][k]["spec"]["constexprs"].get("OVERLAP") for k in e["kernels"]} - {None}
        assert flags == ({True} if e["stage"] in overlap else {False} if e["stage"].split("/")[0] in planned
                         else set()), e
    assert all(e["kernels"] for e in report["entries"])
    assert all(k in report["results"] for e in report["entries"] for k in e["kernels"])
    # the byte-scatter rung runs a gather and the scatter
    assert all(SCATTER in [report["results"][k]["spec"]["kernel"] for k in e["kernels"]]
               for e in report["entries"] if e["stage"] == "byte-scatter")
    # deduplicated: one compilation per distinct specialisation
    assert report["specialisations"] == len(report["results"]) < sum(len(e["kernels"]) for e in report["entries"])


def test_every_specialisation_reaches_code_generation(report):
    bad = audit.problems(report)
    assert not bad, f"{len(bad)} specialisations fail:\n" + "\n".join(bad)
    assert all(r["front_end"] and r["compiler"] == audit.CODEGEN for r in report["results"].values())


def test_planned_unified_buffer_is_recorded(report):
    for r in report["results"].values():
        if r["compiler"] == audit.CODEGEN:
            assert r["ub_bits"] is not None and 0 < r["ub_bits"] <= audit.UB_BITS_910B, r


def test_the_compiler_catches_a_unified_buffer_overflow(audit_installed, tmp_path, monkeypatch):
    """Same check on a probe kernel that fits at 8 rows and overflows at 64; nothing in the temp dir."""
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setenv("ASCEND_AUDIT_BUILD", str(tmp_path / "build"))  # fresh: nothing cached
    monkeypatch.setenv("TMPDIR", str(system_tmp))
    specs = [mx.Spec(probe.__name__, "_tile_softmax_probe_kernel", (("ROWS", rows),),
                     (("pooled_ptr", "*fp32"), ("state_ptr", "*fp32")))
             for rows in (probe.FITS_ROWS, probe.OVERFLOWS_ROWS)]
    results = audit.compile_specs(specs, jobs=2)
    fits, overflows = (results[s.key] for s in specs)
    assert fits["front_end"] and fits["compiler"] == audit.CODEGEN, fits
    assert 0 < fits["ub_bits"] <= audit.UB_BITS_910B
    assert overflows["front_end"] and overflows["compiler"] == audit.UB_OVERFLOW, overflows
    assert "ub overflow, requires" in overflows["compiler_message"]
    assert overflows["ub_bits"] > overflows["ub_available_bits"] == audit.UB_BITS_910B
    assert not overflows["cached"]
    report = {"entries": [{"stage": "probe", "C": 0, "block_size": 64, "state_dtype": "float32",
                           "kernels": [specs[1].key]}],
              "results": {specs[1].key: {**overflows, "spec": specs[1].as_dict()}}}
    assert len(audit.problems(report)) == 1 and "ub overflow" in audit.problems(report)[0]
    assert list(system_tmp.iterdir()) == []


def _tile_rows(spec):
    cx = spec["constexprs"]
    return cx.get("ROW_TILE", cx.get("BLOCK_BS"))


def test_block_centric_gathers_move_whole_tiles_per_table_lookup(report):
    checked = 0
    for e, r in _uses(report):
        if r["spec"]["kernel"] in SEARCH:
            continue
        if e["stage"] in SCALAR_GATHER_STAGES or r["spec"]["kernel"] in NOT_GATHERS:
            if r["spec"]["kernel"] in NOT_GATHERS:  # plain vectors: nothing scalarised either
                assert r["analysis"]["scalar_loops_in_hot_loop"] == 0 == r["analysis"]["discrete_accesses"], (e, r)
            continue
        # a kernel without BLOCK_D (the fused rung) owns the whole head
        a, rows, block_d = r["analysis"], _tile_rows(r["spec"]), r["spec"]["constexprs"].get("BLOCK_D", HEAD_DIM)
        if _step_whole_window(r["spec"]):  # its window loop sits inside a loop over a tile's outputs: one deeper
            a = analyse.analyse_linalg((build_dir() / r["work_dir"] / "kernel.ttadapter").read_text(), hot_depth=3)
            a["copies"] = [vars(c) for c in a["copies"]]
        elem, size = _ELEMENT[e["state_dtype"]]
        tile = f"{rows}x{block_d}x{elem}"
        hot_tiles = [c for c in a["copies"] if c["depth"] >= 2 and not c["in_scalar_loop"] and c["shape"] == tile]
        assert a["scalar_loops_in_hot_loop"] == 0 and a["discrete_accesses"] == 0, (e, tile)
        assert a["table_loads_in_hot_loop"] >= 1 and hot_tiles, (e, tile, a["copies"])
        # values + scores: two [rows, BLOCK_D] tiles per block-table entry
        assert a["bytes_per_scalar_access"] >= 2 * rows * block_d * size, (e, a)
        checked += 1
    cells = 8 * 2 if report["scope"] == "full" else 1  # block sizes x state dtypes a stage is audited at
    assert checked >= (len(mx.stages()) - len(SCALAR_GATHER_STAGES)) * cells


# The whole-window gathers of a step (counted; the merge-or-whole kernels always are), whose loop
# over a token tile's outputs holds the window loop.
_STEP_WHOLE_WINDOW = ("_fused_compress_kernel", "_gather_to_bf16_kernel", "_merge_or_whole_to_slot_kernel",
                      "_merge_or_whole_to_bf16_kernel")


def _step_whole_window(spec: dict) -> bool:
    return spec["kernel"] in _STEP_WHOLE_WINDOW and spec["constexprs"].get("COUNTED", True)


def test_random_gather_is_seen_scalarised(report):
    for e, r in _uses(report):
        if e["stage"] != "random-gather":
            continue
        a, cx = r["analysis"], r["spec"]["constexprs"]
        assert a["scalar_loops_in_hot_loop"] >= 1 and a["discrete_accesses"] >= 1, e
        assert any(c["in_scalar_loop"] for c in a["copies"]), e
        assert a["bytes_per_scalar_access"] < cx["BLOCK_T"] * cx["BLOCK_D"] * 4, e


def test_byte_scatter_lowers_to_plain_byte_copies(report):
    scatters = [r for r in report["results"].values() if r["spec"]["kernel"] == SCATTER]
    # whatever block size and state dtype: a call's (not COUNTED), and a step's for each C (its tiles of
    # C tokens, whose positions and slots it reads as [C] vectors to find a tile's further rows)
    tiles = sorted((r["spec"]["constexprs"]["COUNTED"], r["spec"]["constexprs"]["TOKEN_TILE"]) for r in scatters)
    ratios = sorted(mx.ALL_RATIOS) if report["scope"] == "full" else [4, 128]  # quick: the overlap step's C=4
    assert tiles == [(False, 1)] + [(True, C) for C in ratios], tiles
    for r in scatters:
        a, tile = r["analysis"], r["spec"]["constexprs"]["TOKEN_TILE"]
        assert a["scalar_loops"] == 0 and a["discrete_accesses"] == 0
        assert a["copies"] and not any(c["in_scalar_loop"] for c in a["copies"])
        assert all(c["shape"].endswith("xi8") or c["shape"] == f"{tile}xi64" for c in a["copies"]), a["copies"]
        # one slot's bytes reach the UB as vectors (the scale region's pad byte may be made on chip)
        assert sum(c["bytes"] for c in a["copies"] if c["shape"].endswith("xi8")) >= PAYLOAD_BYTES + SCALE_BYTES - 1


def test_table_prints_every_stage(report):
    table = audit.format_table(report)
    assert all(f"| {s} " in table for s in mx.stages())
    assert "code generation reached" in table


def test_planned_bits_read_from_the_memory_plan(tmp_path):
    # offsets in bytes, extents in bits; a failed retry before the successful plan is ignored
    plan = {"Record": [
        {"scope": "ub", "status": "fail", "memory_info_array": [{"offset": [0], "extent": 9_999_999}]},
        {"scope": "ub", "status": "success", "memory_info_array": [
            {"offset": [0, 32768], "extent": 262144,
             "buffer": "%a = memref.alloc() : memref<16x512xf32, #hivm.address_space<ub>>",
             "source_location": 'loc("/x/kernel.ttadapter.mlir":2:10)'},
            {"offset": [180224], "extent": 32, "buffer": "%b = memref.alloc() : memref<1xf32, #hivm.address_space<ub>>",
             "source_location": 'loc("/x/kernel.ttadapter.mlir":1:5)'}]},
        {"scope": "l1", "status": "success", "memory_info_array": [{"offset": [0], "extent": 99_999_999}]},
    ]}
    (tmp_path / "memory_info_aiv.json").write_text(json.dumps(plan))
    assert planned_ub_bits(tmp_path) == 180224 * 8 + 32
    source = ["%m = arith.maxnumf %x, %y : f32", "%t = tt.load %p : tensor<16x512xf32>"]
    assert largest_buffers(tmp_path, source, count=1) == [
        "64 KiB memref<16x512xf32> from `%t = tt.load %p : tensor<16x512xf32>`"]  # double-buffered: 2 x 32 KiB
    assert planned_ub_bits(tmp_path / "missing") is None


def test_analysis_reads_a_scalarised_loop():
    text = ("""
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    scf.for %a = %x to %y step %z : i32 {
      scf.for %b = %x to %y step %z : i32 {
        %alloc = memref.alloc() : memref<4x64xf32>
        scf.for %i = %c0 to %c4 step %c1 {
          %e = tensor.extract %t[%i] {DiscreteMemAccess} : tensor<4xi64>
          memref.copy %src, %dst : memref<1x64xf32, strided<[64, 1], offset: ?>> """
            """to memref<1x64xf32, strided<[64, 1], offset: ?>>
        } {ExtractedLoadOrStore}
      }
    }
    """)
    out = audit.analyse_linalg(text)
    assert out["scalar_loops"] == 1 and out["scalar_loops_in_hot_loop"] == 1 and out["discrete_accesses"] == 1
    assert out["copies"][0].bytes == 256 and out["copies"][0].in_scalar_loop
    assert out["bytes_per_scalar_access"] == 256 and out["footprint_bytes"] == 1024
