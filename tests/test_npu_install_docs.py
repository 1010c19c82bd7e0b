"""docs/INSTALL.md tells a 910B user what the Makefile and the package really do: the commands in
the order they run, the build prerequisites triton-ascend needs, the torch-npu autoload, the
gpgpu decision, and the versions pyproject.toml pins; no page says the package never imports
torch-npu (``import torch`` does, where it is installed: tests/test_npu_autoload.py)."""

from __future__ import annotations

import re
import subprocess
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
INSTALL = (REPO / "docs" / "INSTALL.md").read_text()
ASCEND = " ".join(INSTALL[INSTALL.index("## Ascend NPU host"):INSTALL.index("## Why the import-time check")].split())


def test_the_ascend_section_gives_the_commands_in_the_order_they_run():
    steps = ["set_env.sh", "make test", "make bench", "-m ascend_kvc.npu_check"]
    at = [ASCEND.find(s) for s in steps]
    assert -1 not in at and at == sorted(at), dict(zip(steps, at))


def test_the_ascend_section_names_the_build_prerequisites_and_the_autoload():
    for needed in ("C++ compiler", "Python headers", "Python 3.9 to 3.11", "CANN 8.5.0",
                   "TORCH_DEVICE_BACKEND_AUTOLOAD=0", "RouteUnavailableError", "65535", "exit status"):
        assert needed.lower() in ASCEND.lower(), needed


def test_the_pinned_versions_are_the_documented_ones():
    pyproject = (REPO / "pyproject.toml").read_text()
    npu_extra = re.search(r"^npu = \[(.*)\]$", pyproject, re.M).group(1)
    assert '"torch-npu==2.7.1"' in npu_extra and '"triton-ascend==3.2.0"' in npu_extra and '"pybind11"' in npu_extra
    assert "`torch-npu==2.7.1`, `triton-ascend==3.2.0`, `pybind11`" in INSTALL
    assert "torch-npu==2.7.1.*`, `triton" not in INSTALL


def test_no_page_says_the_package_never_imports_torch_npu():
    pages = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "ascend_kvc").rglob("*.py")]
    for page in pages:
        text = " ".join(page.read_text().split())
        assert not re.search(r"never imports? torch[-_]npu", text, re.I), page.name


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_the_make_targets_the_docs_name_exist():
    for target in ("test", "bench", "host"):
        proc = subprocess.run(["make", "-n", target, "HOST_KIND=npu"], cwd=REPO, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
