"""bench.occupancy: the vector-core model of every Ascend rung, and docs/ASCEND.md's copy of its table.

CPU only and fast: a model of bytes per program, nothing runs on a device.
"""

import pytest

from ascend_kvc.routes import ASCEND_PLANNED_STAGES, ASCEND_STAGES
from ascend_kvc.stages import piece_row_tile, unsplit_row_tile
from ascend_kvc.stages.work_split import occupancy, plan_split
from ascend_kvc.workloads import OFFICIAL_BLOCK_SIZE, OFFICIAL_CASES
from bench import occupancy as model

UNIT = piece_row_tile(OFFICIAL_BLOCK_SIZE)  # the split's runs are whole row tiles of the official block size
UNSPLIT_TILE = unsplit_row_tile(OFFICIAL_BLOCK_SIZE)  # one program per vector core: the model is a 910B's view


@pytest.fixture(scope="module")
def rows():
    return model.occupancy_rows()


def test_every_case_cores_and_rung_is_modelled(rows):
    keys = {(r.case, r.cores, r.stage) for r in rows}
    assert len(keys) == len(rows) == len(OFFICIAL_CASES) * len(model.CORE_COUNTS) * len(ASCEND_STAGES)
    assert {r.stage for r in rows} == set(ASCEND_STAGES)


def test_each_rung_has_its_own_work_item(rows):
    per_output = {r.stage: r.items_per_output for r in rows if r.cores == 40 and r.case == "R1-T8192-C512"}
    # BLOCK_D 64 / 128 / 256 / 512 of the 512 dims (ascend_kvc.stages); the planned rungs: their pieces
    for stage in ("random-gather", "pre-gather", "block-gather", "block-gather-nomask"):
        assert per_output[stage] == 8
    assert (per_output["block-d128"], per_output["block-d256"]) == (4, 2)
    assert per_output["block-d512"] == per_output["byte-scatter"] == 1  # one output per item
    for stage in ASCEND_PLANNED_STAGES:
        assert per_output[stage] == plan_split(16, 512, 40, row_unit=UNIT, unsplit_row_tile=UNSPLIT_TILE).pieces > 1


def test_every_program_reads_its_share_and_all_bytes_are_read(rows):
    for r in rows:
        assert r.mean_bytes * r.programs == pytest.approx(r.outputs * r.compress_ratio * model.ROW_BYTES), r
        assert r.programs == min(r.cores, r.work_items) and r.max_bytes >= r.mean_bytes
        assert r.busy == pytest.approx(r.outputs * r.compress_ratio * model.ROW_BYTES / (r.cores * r.max_bytes))
        assert r.max_over_mean == pytest.approx(r.max_bytes / r.mean_bytes)


def test_unsplit_rungs_deal_items_round_robin(rows):
    # recount each program's bytes item by item, as the kernels' loops hand items out
    for r in rows:
        if r.split:
            continue
        item_bytes = r.compress_ratio * model.ROW_BYTES // r.items_per_output
        per_program = [len(range(p, r.work_items, r.programs)) * item_bytes for p in range(r.programs)]
        assert r.max_bytes == max(per_program), r
        assert r.mean_bytes == pytest.approx(sum(per_program) / r.programs), r


def test_planned_rungs_are_the_planners_split(rows):
    for r in rows:
        if r.stage in ASCEND_PLANNED_STAGES:
            split = plan_split(r.outputs, r.compress_ratio, r.cores, row_unit=UNIT, unsplit_row_tile=UNSPLIT_TILE)
            occ = occupancy(split)
            assert split.split  # one program per core and wider piece tiles: every official case splits
            assert (r.items_per_output, r.pieces, r.programs, r.busy, r.max_over_mean) == (
                split.pieces, occ.max_pieces, occ.programs, occ.busy, occ.max_over_mean)


def test_one_output_per_item_leaves_cores_idle_where_the_split_does_not(rows):
    # 16 outputs on 40 cores: block-d512 keeps 16 busy; the planned split spreads them over all 40
    pick = {r.stage: r for r in rows if r.case == "R1-T8192-C512" and r.cores == 40}
    assert pick["block-d512"].programs == 16 and pick["block-d512"].busy == pytest.approx(0.4)
    assert pick["triton-quant"].programs == 40 and pick["triton-quant"].busy >= 0.9


def test_doc_block_is_what_the_module_prints(capsys):
    assert model.main([]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == model.format_table(model.occupancy_rows())
    assert model.doc_block(model.DOC.read_text()) == printed, (
        "docs/ASCEND.md's occupancy table is stale: run python -m bench.occupancy --update-docs")


def test_update_docs_replaces_only_the_block():
    text = "intro\n<!-- BEGIN occupancy table -->\nold\n<!-- END occupancy table -->\nrest\n"
    new = model.replace_doc_block(text, "| a |\n")
    assert new == "intro\n<!-- BEGIN occupancy table -->\n| a |\n<!-- END occupancy table -->\nrest\n"
    with pytest.raises(ValueError):
        model.replace_doc_block("no block here", "x")


def test_report_section_models_the_runs_cases_rungs_and_grid():
    from bench.summary import occupancy_lines

    def row(route, case="R1-T8192-C512"):
        return {"case": case, "layout": "shuffled", "route": route, "check": "ok"}

    rows = [row("reference"), row("ascend"), row("ascend:block-d512"), row("gpgpu", "odd-name")]
    lines = occupancy_lines(rows, {"device": "npu", "ascend_programs": 32})
    text = "\n".join(lines)
    assert "A model, not a measurement" in lines[0] and "at most 32 programs" in text
    table = [line for line in lines if line.startswith("| R")]
    assert [line.split("|")[3].strip() for line in table] == ["20", "24", "32", "40", "48"]
    # 'ascend' is the default rung; only the rungs that ran are modelled
    header = next(line for line in lines if line.startswith("| case "))
    assert "`triton-quant`" in header and "`block-d512`" in header and "`fused`" not in header
    assert occupancy_lines([row("reference"), row("gpgpu")], {"device": "cuda"}) == []
