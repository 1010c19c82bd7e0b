"""``python -m bench`` as a command-line tool: where the report goes, help, argument errors, progress.

Bad arguments must end the run with argparse's one-line error and status 2 before any work (no
workload built, no device touched); progress must hold no carriage return when stderr is a log.
"""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import cli

REPO = Path(__file__).resolve().parent.parent


def _fail_if_work_starts(monkeypatch):
    """Any attempt to measure or build a workload fails the test."""
    import ascend_kvc.workloads
    import bench.environment

    def no_work(*a, **k):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(ascend_kvc.workloads, "make_workload", no_work)
    monkeypatch.setattr(bench.environment, "library_environment", no_work)
    monkeypatch.setattr(cli, "_resolve_device", no_work)


@pytest.mark.parametrize("argv, says", [
    (["--shuffle", "--contiguous"], "not allowed with argument"),
    (["--report", "x", "--no-report"], "not allowed with argument"),
    (["--cases", "3,512,128"], "T=512 must be a multiple of R=3"),
    (["--cases", "1,64,128"], "at least one window of C=128"),
    (["--cases", "1,1024,100"], "C must be one of 128, 256, 512"),
    (["--cases", "0,512,128"], "R and T must be >= 1"),
    (["--cases", "1,512"], "R,T,C: R requests"),
    (["--cases", "offical"], "'offical'"),
    (["--routes", "reference,warp-drive"], "--routes: unknown 'warp-drive'"),
    (["--routes", "reference,,gpgpu"], "--routes: unknown ''"),
    (["--stages", "block-d512,warp-drive"], "--stages: unknown 'warp-drive'"),
    (["--host-calls", "-1"], "--host-calls: must be >= 1"),
    (["--block-size", "0"], "--block-size: must be >= 1"),
    (["--csv", "/no/such/folder/r.csv"], "--csv: '/no/such/folder/r.csv' is not a file in an existing folder"),
    (["--json", "."], "--json: '.' is not a file"),
])
def test_bad_arguments_are_one_line_and_status_2_before_any_work(argv, says, monkeypatch, capsys):
    _fail_if_work_starts(monkeypatch)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--device", "cpu", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    message = err.strip().splitlines()[-1]
    assert message.startswith("python -m bench: error: ") and says in message, err
    assert "Traceback" not in err


def test_good_arguments_pass_the_checks():
    parser = cli.build_parser()
    args = parser.parse_args(["--cases", "small", "2,512,128", "--routes", "reference,ascend,ascend:fused,gpgpu",
                              "--stages", "fused", "--host-calls", "1", "--block-size", "1"])
    cli.check_args(parser, args)
    assert args.case_list[-1] == (2, 512, 128)


def test_a_bad_case_in_a_real_process_is_one_line_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "bench", "--device", "cpu", "--cases", "3,512,128"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("usage: python -m bench") and lines[-1].startswith("python -m bench: error: --cases")
    assert "Traceback" not in proc.stderr


def test_help_shows_defaults_examples_and_no_rst(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    flat = " ".join(text.split())
    assert "``" not in text and ":func:" not in text
    assert "(default: 100)" in flat and "(default: auto)" in flat and "(default: None)" not in flat
    examples = text.split("examples:")[1]
    assert "python -m bench --cases" in examples and 'make bench BENCH_ARGS="' in examples
    parser = cli.build_parser()
    for action in parser._actions:
        assert action.help, f"{action.option_strings} has no help"
        if not (action.default is None or action.default is False or action.default == "==SUPPRESS=="):
            assert f"{' '.join(action.help.split())} (default: {action.default})" in flat, action.option_strings
        elif action.default is None:  # depends on the device or means "not written": the help says so
            assert "default" in action.help or action.option_strings[0] in ("--csv", "--json", "--plot", "--report")


def test_default_report_folder_is_the_ignored_out_folder():
    folder = Path(cli.report_folder(cli.AUTO_REPORT, {"device": "cuda", "name": "NVIDIA H200"}))
    assert folder.parent == REPO / "bench" / "out" and folder.name.startswith("h200-")
    assert cli.report_folder("somewhere", {"device": "cpu"}) == "somewhere"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(folder / "report.md")], cwd=REPO)
    assert ignored.returncode == 0, f"{folder} is not ignored by git"


def test_report_without_a_folder_writes_into_the_out_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "OUT_ROOT", str(tmp_path / "out"))
    rc = cli.main(["--device", "cpu", "--cases", "1,256,128", "--routes", "reference", "--no-progress",
                   "--report"])
    assert rc == 0
    written = list((tmp_path / "out").glob("cpu-*/report.md"))
    assert len(written) == 1 and f"report: {written[0]}" in capsys.readouterr().out


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_progress_redraws_only_on_a_terminal(tty):
    stream = _Stream(tty)
    progress = cli.Progress(3, True, stream)
    for label in ("a", "b", "c"):
        progress.step(label)
    text = stream.getvalue()
    if tty:
        assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    else:
        assert "\r" not in text and text.splitlines() == [
            line for line in text.splitlines() if line.startswith("[")] and len(text.splitlines()) == 3
        assert text.splitlines()[1].startswith("[2/3]") and text.splitlines()[1].endswith(" b")


def test_no_progress_writes_nothing():
    stream = _Stream(True)
    progress = cli.Progress(2, False, stream)
    progress.step("a")
    assert stream.getvalue() == ""


def test_a_logged_run_has_no_carriage_return(tmp_path):
    """stderr to a file, as ``make bench 2>&1 | tee log`` gives: plain progress lines."""
    proc = subprocess.run([sys.executable, "-m", "bench", "--device", "cpu", "--cases", "1,256,128",
                           "--routes", "reference", "--no-report"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stdout + proc.stderr
    assert "[1/1]" in proc.stderr and "R1-T256-C128 shuffled reference" in proc.stderr


def test_cpu_table_leaves_out_what_means_nothing_there():
    from bench.report import TABLE, format_table

    row = {key: 1.5 for key, _ in TABLE}
    row.update(case="R1-T256-C128", layout="shuffled", route="gpgpu", check="ok")
    header = lambda text: [c.strip() for c in text.splitlines()[0].strip("|").split("|")]  # noqa: E731
    assert header(format_table([row], "cuda")) == [title for _, title in TABLE]
    assert header(format_table([row], "cpu")) == ["case", "layout", "route", "check", "median ms", "triton launches",
                                                   "aten ops"]
    assert "the CSV and JSON keep them" in format_table([row], "cpu")


def test_c4_case_is_the_overlapping_prefill_chunk_and_not_official():
    from ascend_kvc.workloads import C4_CASE, OFFICIAL_CASES

    assert C4_CASE == (1, 8192, 4) and C4_CASE not in OFFICIAL_CASES  # 2048 outputs at compress_ratio 4
    assert cli._parse_cases(["C4"]) == [C4_CASE]
    assert C4_CASE not in cli._parse_cases(["official"]) + cli._parse_cases(["small"])


def test_c4_case_runs_with_overlap_on_the_routes_that_compute_it(tmp_path, monkeypatch, capsys):
    """The C4 case at a tiny scale (64 tokens): overlap, shuffled blocks only, judged by the oracle
    on the reference route and fused; a study rung, which refuses overlap, is left out of it."""
    import csv

    from ascend_kvc import workloads

    monkeypatch.setattr(workloads, "C4_CASE", (1, 64, 4))
    # On a GPU machine the kernels of this worker are compiled: the bench runs there, not interpreted.
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rc = cli.main(["--device", device, "--cases", "C4", "--routes", "reference,ascend:byte-scatter,ascend:fused",
                   "--no-progress", "--csv", str(tmp_path / "c4.csv"), "--host-calls", "1"])
    assert rc == 0
    assert "R1-T64-C4-overlap: not run on ascend:byte-scatter" in capsys.readouterr().out
    rows = list(csv.DictReader(open(tmp_path / "c4.csv")))
    assert [(r["case"], r["layout"], r["route"], r["check"], r["num_outputs"]) for r in rows] == [
        ("R1-T64-C4-overlap", "shuffled", route, "ok", "16") for route in ("reference", "ascend:fused")]


@pytest.mark.parametrize("kv_format", ["fp8_e4m3", "bf16"])
def test_kv_format_runs_every_case_in_that_format(kv_format, tmp_path, monkeypatch, capsys):
    """``--kv-format``: each case writes that cache (judged by the oracle in that format), and a
    route that does not write it (a study rung) is left out, said on stdout."""
    import csv

    from ascend_kvc import workloads

    monkeypatch.setattr(workloads, "C4_CASE", (1, 64, 4))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rc = cli.main(["--device", device, "--cases", "1,256,128", "C4", "--shuffle", "--kv-format", kv_format,
                   "--routes", "reference,ascend:byte-scatter,gpgpu", "--no-progress", "--csv", str(tmp_path / "f.csv"),
                   "--host-calls", "1"])  # --shuffle: one layout on a GPU too (both are its default)
    assert rc == 0
    out = capsys.readouterr().out
    assert f"cache format: {kv_format}" in out and "R1-T256-C128: not run on ascend:byte-scatter" in out
    rows = list(csv.DictReader(open(tmp_path / "f.csv")))
    assert [(r["case"], r["route"], r["check"], r["kv_format"]) for r in rows] == [
        ("R1-T256-C128", "reference", "ok", kv_format), ("R1-T256-C128", "gpgpu", "ok", kv_format),
        ("R1-T64-C4-overlap", "reference", "ok", kv_format), ("R1-T64-C4-overlap", "gpgpu", "ok", kv_format)]
