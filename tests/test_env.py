"""``python -m ascend_kvc.env`` and the Triton-install check that ``import ascend_kvc`` runs.

Fake installs (dist-info folders, a ``triton`` package, a CANN install-info file) in temporary
folders stand in for what this CPU machine lacks; subprocesses see them through ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from ascend_kvc import env
from ascend_kvc.triton_install import TritonConflictError, check_triton_install, triton_conflict, triton_distributions

REPO = Path(__file__).resolve().parent.parent


def _fake_dist(site: Path, name: str, version: str, package: str | None = None) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if package:
        (site / package).mkdir(exist_ok=True)
        (site / package / "__init__.py").write_text(f"__version__ = {version!r}\n")


def _run(args, pythonpath, **env_vars):
    env_ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env_.update(env_vars)
    env_["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(REPO)])
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env_, capture_output=True, text=True, timeout=120)


def test_report_on_this_machine():
    info = env.collect(devices=True)
    json.dumps(info)  # serialisable, for the benchmark's JSON
    assert info["torch"]["version"] == torch.__version__
    assert info["ascend_kvc"]["version"] == __import__("ascend_kvc").__version__
    text = env.format_report(info)
    assert f"torch              version {torch.__version__}" in text
    if not torch.cuda.is_available():
        assert "CUDA               none" in text
    else:
        assert torch.cuda.get_device_name(0) in text
    if info["triton"].get("installed"):
        assert info["triton"]["kind"] in ("community", "triton-ascend")
        assert f"triton             {info['triton']['version']} ({info['triton']['kind']})" in text


def test_report_lists_ascend_and_triton_variables_only(monkeypatch):
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/somewhere")
    monkeypatch.setenv("UNRELATED_SECRET_THING", "x")
    text = env.format_report(env.collect(devices=False))
    assert "  ASCEND_RT_VISIBLE_DEVICES=0,1" in text
    assert "  TRITON_CACHE_DIR=/tmp/somewhere" in text
    assert "UNRELATED_SECRET_THING" not in text
    assert not any(line.startswith(("CUDA", "NPU")) for line in text.splitlines())  # devices=False


def test_cann_version_from_install_info(tmp_path, monkeypatch):
    root = tmp_path / "ascend-toolkit" / "latest"
    (root / "aarch64-linux").mkdir(parents=True)
    (root / "aarch64-linux" / "ascend_toolkit_install.info").write_text(
        "package_name=Ascend-cann-toolkit\nversion=8.5.0\ninnerversion=V100R001\narch=aarch64\nos=linux\n")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(root))
    cann = env.cann_version()
    assert cann["version"] == "8.5.0" and cann["arch"] == "aarch64"
    assert "CANN               version 8.5.0, file " in env.format_report(env.collect(devices=False))
    assert env.cann_version([str(tmp_path / "nowhere")]) is None


def test_mixed_triton_install_is_a_conflict(tmp_path):
    site = tmp_path / "site-packages"
    _fake_dist(site, "triton", "3.8.0", package="triton")
    _fake_dist(site, "triton-ascend", "3.2.0")
    dists = triton_distributions([str(site)])
    assert sorted((d.name, d.version) for d in dists) == [("triton", "3.8.0"), ("triton-ascend", "3.2.0")]
    reason = triton_conflict(dists)
    assert reason is not None and "triton 3.8.0" in reason and "triton-ascend 3.2.0" in reason
    assert os.path.realpath(site) in reason


def test_side_folder_triton_ascend_is_no_conflict(tmp_path):
    site, side = tmp_path / "site-packages", tmp_path / "side"
    _fake_dist(site, "triton", "3.8.0", package="triton")
    _fake_dist(side, "triton-ascend", "3.2.0", package="triton")
    assert triton_conflict(triton_distributions([str(side), str(site)])) is None


def test_import_refuses_a_mixed_install(tmp_path):
    site = tmp_path / "site-packages"
    _fake_dist(site, "triton", "3.8.0", package="triton")
    _fake_dist(site, "triton-ascend", "3.2.0")
    proc = _run(["-c", "import ascend_kvc"], [site])
    assert proc.returncode != 0
    assert "TritonConflictError" in proc.stderr and "pip uninstall -y triton triton-ascend" in proc.stderr, proc.stderr


def test_env_cli_with_triton_ascend_in_a_side_folder_and_a_broken_torch_npu(tmp_path):
    side = tmp_path / "side"
    _fake_dist(side, "triton-ascend", "3.2.0", package="triton")
    _fake_dist(side, "torch-npu", "2.14.0", package="torch_npu")
    (side / "torch_npu" / "__init__.py").write_text("raise RuntimeError('no CANN here')\n")
    # No backend autoload: on an NPU host torch would import the fake torch_npu at `import torch`.
    proc = _run(["-m", "ascend_kvc.env", "--json"], [side], TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["triton"]["kind"] == "triton-ascend" and info["triton"]["version"] == "3.2.0"
    assert info["triton_conflict"] is None
    assert info["torch_npu"] == "2.14.0" and info["triton_ascend"] == "3.2.0"
    assert info["npu"] == {"error": "RuntimeError: no CANN here"}


def test_this_environment_passes_the_check():
    check_triton_install()  # the test run itself imported ascend_kvc; this names the reason if not
    assert issubclass(TritonConflictError, ImportError)


def test_the_commit_comes_from_one_place(monkeypatch):
    """The report and the benchmark's machine line name the same commit: ``ASCEND_KVC_COMMIT`` where
    the tree travelled without .git, else git's (this checkout's HEAD), else ``unknown`` in the
    benchmark's line."""
    from bench.machine import git_commit

    monkeypatch.setenv("ASCEND_KVC_COMMIT", "abc1234")
    assert env.git_commit() == git_commit() == "abc1234"
    monkeypatch.delenv("ASCEND_KVC_COMMIT")
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=Path(__file__).resolve().parent.parent,
                          capture_output=True, text=True).stdout.strip()
    if head:
        assert env.git_commit().split("+")[0] == git_commit().split("+")[0] == head
    monkeypatch.setattr(env, "git_commit", lambda: None)
    assert git_commit() == "unknown"
