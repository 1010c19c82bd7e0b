"""Where torch-npu is installed, ``import torch`` loads it (torch's device-backend autoload, the
``torch.backends`` entry point torch-npu declares), so ``import ascend_kvc`` does too, though the
package imports torch-npu nowhere itself; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off. A
fake ``torch_npu`` distribution with that entry point, in a folder put on the path of a fresh
interpreter, records whether it was loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake_torch_npu(tmp_path) -> Path:
    site = tmp_path / "site"
    package = site / "torch_npu"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import os\n"
        "def _autoload():\n"
        "    open(os.environ['FAKE_TORCH_NPU_LOADED'], 'w').write('autoload')\n")
    info = site / "torch_npu-2.7.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_npu\nVersion: 2.7.1\n")
    (info / "entry_points.txt").write_text("[torch.backends]\ntorch_npu = torch_npu:_autoload\n")
    (info / "RECORD").write_text("")
    return site


@pytest.mark.parametrize("autoload", [None, "0"])
def test_import_ascend_kvc_loads_torch_npu_through_torch_unless_autoload_is_off(fake_torch_npu, tmp_path, autoload):
    marker = tmp_path / "loaded"
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), str(fake_torch_npu)]), FAKE_TORCH_NPU_LOADED=str(marker))
    if autoload is not None:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = autoload
    proc = subprocess.run([sys.executable, "-c", "import ascend_kvc"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists() == (autoload is None)
