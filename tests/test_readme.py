"""The documentation against the code and the record it describes.

- README.md's "Use" example runs as pasted (CPU, the default route) and does what its comments say.
- README.md's ladder table lists exactly ``ASCEND_STAGES``, each with the modules its kernels live in.
- README.md's performance rows are rows of bench/RESULTS.md, the record they are quoted from.
- docs/ASCEND.md's two audit tables are what ``python -m tools.ascend_lowering`` prints (the
  occupancy table there is kept by tests/test_bench_occupancy.py).
- Every ``<!-- BEGIN name -->`` block in README.md and docs/ is one of those, so none is left unkept.
- Every relative link in README.md, docs/*.md and bench/RESULTS.md points to a tracked file.
"""

import contextlib
import io
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
ASCEND_DOC = REPO / "docs" / "ASCEND.md"
RESULTS = REPO / "bench" / "RESULTS.md"
# Every generated block in README.md and docs/, and the test that keeps it equal to the code.
KEPT_BLOCKS = {
    "ladder table": "test_ladder_table_lists_exactly_the_stages_and_their_modules",
    "occupancy table": "tests/test_bench_occupancy.py::test_doc_block_is_what_the_module_prints",
    "audit table": "test_audit_tables_are_what_the_audit_prints",
    "audit data movement": "test_audit_tables_are_what_the_audit_prints",
}


def _section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"no '## {heading}' section"
    return m.group(1)


def _block(text: str, name: str) -> str:
    m = re.search(rf"<!-- BEGIN {re.escape(name)} -->\n(.*?)<!-- END {re.escape(name)} -->", text, re.S)
    assert m, f"no '{name}' block"
    return m.group(1).strip()


def _table_rows(text: str) -> list[list[str]]:
    """Body rows of the Markdown tables in ``text``, as stripped cells (header and rule left out)."""
    rows, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        if i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: ") and lines[i + 1].startswith("|"):
            continue  # a header row
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_use_example_runs_as_pasted():
    code = re.findall(r"```python\n(.*?)```", _section(README.read_text(), "Use"), re.S)
    assert len(code) == 1, "the Use section should hold one python block"
    namespace: dict = {"__name__": "readme_use_example"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code[0], "README.md (Use)", "exec"), namespace)
    assert "bytes changed in place" in printed.getvalue()
    w, new_cache, kv_cache, before = (namespace[k] for k in ("w", "new_cache", "kv_cache", "before"))
    # what the comments promise: the in-place call changed at most the written slots' bytes, and
    # those bytes are the ones the new-cache form wrote
    changed = kv_cache != before
    assert 0 < int(changed.sum()) <= 584 * w.num_outputs
    assert torch.equal(kv_cache[changed], new_cache[changed])


def test_ladder_table_lists_exactly_the_stages_and_their_modules():
    from ascend_kvc.routes import ASCEND_PLANNED_STAGES, ASCEND_STAGES
    from ascend_kvc.stages import kernel_specializations

    rows = _table_rows(_block(README.read_text(), "ladder table"))
    listed, modules = [], {}
    for stage_cell, module_cell, _ in rows:
        names = re.findall(r"`([a-z0-9-]+)`", stage_cell)
        stages = [n for n in names if n != "ascend"]  # "`triton-quant` (= `ascend`)"
        files = re.findall(r"`([a-z_]+\.py)`", module_cell)
        assert files, f"no module named for {stage_cell}"
        for f in files:
            assert (REPO / "ascend_kvc" / "stages" / f).is_file(), f"{stage_cell}: no ascend_kvc/stages/{f}"
        listed += stages
        for s in stages:
            modules[s] = set(files)
    assert listed == list(ASCEND_STAGES), "README's ladder table must list ASCEND_STAGES, in order"
    for stage in ASCEND_STAGES:
        for split in (False, True) if stage in ASCEND_PLANNED_STAGES else (False,):
            for spec in kernel_specializations(stage, 8, 128, torch.float32, split=split):
                file = spec.module.rsplit(".", 1)[1] + ".py"
                assert file in modules[stage], f"{stage}: {spec.kernel} lives in {file}, not listed"


def test_performance_rows_are_the_records():
    section = _section(README.read_text(), "Performance on an NVIDIA H200")
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert len(table) >= 3, "the performance section should hold one table"
    record = set(RESULTS.read_text().splitlines())
    for line in table:
        assert line in record, f"README's performance row is not in bench/RESULTS.md: {line}"


@pytest.mark.audit
def test_audit_tables_are_what_the_audit_prints(audit_report):
    from tools import ascend_lowering as audit

    report = audit_report
    if report["scope"] != "full":
        pytest.skip("ASCEND.md's tables are the whole matrix's: make audit (which CI runs) checks them")
    text = ASCEND_DOC.read_text()

    def table(printed: str) -> str:  # the table's lines, without the legend the tool prints under it
        return "\n".join(line for line in printed.splitlines() if line.startswith("|"))

    hint = "docs/ASCEND.md's {} is stale: paste the table python -m tools.ascend_lowering prints"
    assert _block(text, "audit table") == table(audit.format_table(report)), hint.format("audit table")
    assert _block(text, "audit data movement") == table(audit.format_data_movement(report)), (
        hint.format("data-movement table"))


def test_every_generated_block_is_kept_by_a_test():
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        begins = re.findall(r"<!-- BEGIN (.+?) -->", text)
        ends = re.findall(r"<!-- END (.+?) -->", text)
        assert begins == ends, f"{page.name}: unmatched block markers"
        for name in begins:
            assert name in KEPT_BLOCKS, f"{page.name}: block '{name}' is kept equal to the code by no test"


def _tracked_files() -> set[str]:
    if os.environ.get("ASCEND_KVC_COMMIT"):  # a tree copied to another machine: any .git there is not its own
        pytest.skip("a copied tree (ASCEND_KVC_COMMIT set): git's file list is not this tree's")
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: cannot list tracked files")
    return {p for p in out.decode().split("\0") if p}


def test_relative_links_point_to_tracked_files():
    tracked = _tracked_files()
    folders = {str(Path(p).parent) for p in tracked} | {str(q) for p in tracked for q in Path(p).parents}
    pages = [README, RESULTS, *sorted((REPO / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.is_relative_to(REPO), f"{page.name} links outside the repository: {target}"
            rel = path.relative_to(REPO).as_posix()
            assert rel in tracked or rel in folders, f"{page.name} links a file git does not track: {target}"
            checked += 1
    assert checked > 20  # the pages do link the record, the docs and the data
