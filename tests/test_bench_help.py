"""Every ``python -m bench.<module>`` a user can run answers ``--help`` with status 0 and names itself.

The modules are found by their ``if __name__ == "__main__":`` guard, so a new tool is checked
without being listed here; one that parses arguments through a ``build_parser()`` must give every
option a help text.
"""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUNNABLE = sorted(p.stem for p in (REPO / "bench").glob("*.py")
                  if p.stem != "__main__" and 'if __name__ == "__main__":' in p.read_text())


def test_the_tools_are_found():
    assert {"profile_case", "host_overhead", "sweep_gpgpu", "versus", "report"} <= set(RUNNABLE)


@pytest.mark.parametrize("module", RUNNABLE)
def test_help_exits_0(module):
    proc = subprocess.run([sys.executable, "-m", f"bench.{module}", "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: python -m bench.{module}") and "Traceback" not in proc.stderr
    assert "``" not in proc.stdout and ":func:" not in proc.stdout  # no raw RST markup


@pytest.mark.parametrize("module", RUNNABLE)
def test_every_option_has_help(module):
    mod = importlib.import_module(f"bench.{module}")
    if not hasattr(mod, "build_parser"):
        pytest.skip(f"bench.{module} builds its parser inside main (checked by --help above)")
    for action in mod.build_parser()._actions:
        assert action.help, f"bench.{module}: {action.option_strings or action.dest} has no help"


@pytest.mark.parametrize("module, argv, says", [
    ("host_overhead", ["--cases", "3,512,128"], "--cases: '3,512,128': T=512 must be a multiple of R=3"),
    ("host_overhead", ["--route", "warp-drive"], "--route: unknown 'warp-drive'"),
    ("sweep_gpgpu", ["--tiles", "512,16"], "--tiles: expected D,ROWS,WARPS,STAGES"),
    ("sweep_gpgpu", ["--cases", "1,1024,100"], "C must be one of 128, 256, 512"),
    ("versus", ["--variant", "generic"], "--variant: expected LABEL=..., got 'generic'"),
    ("versus", ["--routes", "gpgpu,warp-drive"], "--routes: unknown 'warp-drive'"),
    ("versus", ["--passes", "0"], "--passes must be >= 1"),
    ("versus", ["/no/such/entry.py"], "path: no file '/no/such/entry.py'"),
])
def test_tools_refuse_bad_arguments_in_one_line(module, argv, says, capsys):
    mod = importlib.import_module(f"bench.{module}")
    with pytest.raises(SystemExit) as exit_:
        mod.main(argv)
    assert exit_.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"python -m bench.{module}: error: ") and says in line, line


def test_sweep_runs_ratio_4_as_the_overlapping_compressor():
    """``--cases C4`` sweeps the case ``python -m bench`` runs: 2C-row windows of 2048-wide state;
    the official ratios stay plain."""
    from bench.sweep_gpgpu import sweep_workload

    small_c4, plain = sweep_workload((1, 64, 4), "cpu"), sweep_workload((1, 256, 128), "cpu")
    assert small_c4.overlap and small_c4.state_cache.shape[-1] == 2048 and small_c4.tags["shuffle"]
    assert not plain.overlap and plain.state_cache.shape[-1] == 1024
