"""Packaging: what the wheel installs, and what each platform extra resolves to.

The wheel is built from a copy of this checkout (``pip wheel --no-deps``) and listed. The extras
are resolved by pip itself against the package index (``pip install --dry-run --report``) for
Linux x86-64 and aarch64, CPython 3.11, binary wheels only, without installing anything.

Those resolutions model the documented install order: torch's CPU build is installed first
(on an Ascend host that is required, because PyPI's Linux torch depends on community Triton). A
metadata-only stand-in for that build, carrying the CPU build's own requirements, is offered to
pip and pinned, so each report shows exactly what ascend_kvc and its extra add on top of torch.

They need the package index; when it cannot be reached they skip and say so. Any other pip
failure (a conflict, a missing wheel) fails the test with pip's own message.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LIBRARY_PACKAGES = ("ascend_kvc", "gpgpu_fallback")

# torch's CPU build, as the PyTorch CPU wheel index publishes it: no Triton, no CUDA libraries.
# On an Ascend host the version triton-ascend's installation guide pairs with torch-npu 2.7.1;
# elsewhere the current one.
TORCH_CPU = {"npu": "2.7.1+cpu", "cpu": "2.14.0+cpu", "cuda": "2.14.0+cpu"}
TORCH_CPU_REQUIRES = ("filelock", "typing-extensions>=4.10.0", "setuptools>=77.0.3", "sympy>=1.13.3",
                      "networkx>=2.5.1", "jinja2", "fsspec>=0.8.5")
# What a glibc-2.28 Linux host accepts (pip matches the tags given, not older ones implied).
PLATFORMS = {
    arch: [f"manylinux_2_28_{arch}", f"manylinux_2_27_{arch}", f"manylinux_2_17_{arch}", f"manylinux2014_{arch}"]
    for arch in ("x86_64", "aarch64")
}
COMMUNITY_TRITON = {"triton", "pytorch-triton"}
UNREACHABLE = re.compile(r"NewConnectionError|Failed to establish a new connection|Temporary failure in name "
                         r"resolution|Name or service not known|Network is unreachable|ProxyError|"
                         r"Max retries exceeded|Connection refused|ConnectTimeout|timed out", re.I)


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the checkout (a build in place would leave build/ behind)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".ascend-triton", ".ascend-numpy", "__pycache__", "*.egg-info", "build", "results",
        ".pytest_cache", ".whl"))
    # The environment's setuptools when it has one (no download); an isolated build otherwise.
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "--disable-pip-version-check",
         "-q", "-w", str(tmp / "dist"), str(src)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = (tmp / "dist").glob("ascend_kvc-*.whl")
    return built


def test_wheel_installs_only_the_library(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == set(LIBRARY_PACKAGES), sorted(top)
    # Every module of the library is in it, subpackages (ascend_kvc/stages/) included: nothing
    # dropped by the package filter.
    for package in LIBRARY_PACKAGES:
        for module in (REPO / package).rglob("*.py"):
            name = module.relative_to(REPO).as_posix()
            assert name in names, f"{name} missing from {wheel.name}"
    (info,) = dist_info
    assert zipfile.ZipFile(wheel).read(f"{info}/top_level.txt").decode().split() == list(LIBRARY_PACKAGES)


def test_wheel_metadata_leaves_triton_to_the_platform_extras(wheel):
    (meta,) = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA")]
    requires = [line.split(":", 1)[1].strip() for line in zipfile.ZipFile(wheel).read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]
    base = [r for r in requires if "extra ==" not in r]
    assert not any(_canon(re.split(r"[ <>=!~;\[]", r)[0]) in COMMUNITY_TRITON | {"triton-ascend"} for r in base), base
    extras = set(re.findall(r'extra == "([^"]+)"', "\n".join(requires)))
    assert {"cpu", "cuda", "npu", "test", "bench"} <= extras, extras


@pytest.mark.parametrize("module", ["bench", "tools.ascend_lowering"])
def test_bench_and_tools_still_run_from_the_checkout(module):
    proc = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout


@pytest.fixture(scope="module")
def torch_cpu_stand_in(tmp_path_factory):
    """``make(version) -> folder``: a metadata-only wheel named like torch's CPU build, with that
    build's requirements, and a constraints file pinning it."""
    return lambda version: _torch_cpu_stand_in(tmp_path_factory.mktemp("torch-cpu"), version)


def _torch_cpu_stand_in(folder: Path, version: str) -> Path:
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(folder / f"torch-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
                   + "".join(f"Requires-Dist: {r}\n" for r in TORCH_CPU_REQUIRES))
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: ascend_kvc-tests\nRoot-Is-Purelib: true\n"
                   "Tag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    (folder / "constraints.txt").write_text(f"torch=={version}\n")
    return folder


def resolve(wheel: Path, extra: str, arch: str, make_stand_in, tmp: Path) -> dict[str, str]:
    """``{distribution: version}`` that ``pip install 'ascend_kvc[extra]'`` would install on ``arch``."""
    stand_in = make_stand_in(TORCH_CPU[extra])
    report = tmp / f"report-{extra}-{arch}.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
           "--disable-pip-version-check", "--retries", "1", "--timeout", "30",
           "--target", str(tmp / "target"), "--report", str(report),
           "--only-binary=:all:", "--python-version", "3.11", *(f"--platform={p}" for p in PLATFORMS[arch]),
           "--find-links", str(stand_in), "--constraint", str(stand_in / "constraints.txt"),
           f"{wheel}[{extra}]"]
    # The index alone: no pip config files, local wheel folders or constraint files of this machine.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in ("PIP_INDEX_URL", "PIP_CERT")}
    env["PIP_CONFIG_FILE"] = os.devnull
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        unreachable = UNREACHABLE.search(proc.stderr)
        if unreachable:
            pytest.skip(f"the package index cannot be reached from here ({unreachable.group(0)}): "
                        f"{proc.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"pip could not resolve ascend_kvc[{extra}] for {arch}:\n{proc.stderr}")
    return {_canon(item["metadata"]["name"]): item["metadata"]["version"]
            for item in json.loads(report.read_text())["install"]}


@pytest.mark.network
@pytest.mark.parametrize("arch", sorted(PLATFORMS))
def test_npu_extra_resolves_triton_ascend_and_no_community_triton(wheel, torch_cpu_stand_in, tmp_path, arch):
    got = resolve(wheel, "npu", arch, torch_cpu_stand_in, tmp_path)
    print(f"ascend_kvc[npu] on {arch}:", " ".join(f"{k}=={v}" for k, v in sorted(got.items())))
    # torch-npu exactly 2.7.1, the pair triton-ascend 3.2.0's installation guide gives for CANN 8.5.0:
    # its post builds (2.7.1.post1 and later) link CANN runtime symbols that 2.7.1 does not.
    assert got.get("triton-ascend") == "3.2.0" and got.get("torch-npu") == "2.7.1", got
    # triton-ascend declares no requirements, yet `import triton` loads its backend, which imports pybind11.
    assert "pybind11" in got, got
    assert got.get("torch") == TORCH_CPU["npu"], got
    assert not COMMUNITY_TRITON & set(got), f"community Triton in the npu set: {got}"


@pytest.mark.network
@pytest.mark.parametrize("extra,arch", [("cuda", "x86_64"), ("cuda", "aarch64"), ("cpu", "x86_64")])
def test_gpu_and_cpu_extras_resolve_community_triton(wheel, torch_cpu_stand_in, tmp_path, extra, arch):
    got = resolve(wheel, extra, arch, torch_cpu_stand_in, tmp_path)
    print(f"ascend_kvc[{extra}] on {arch}:", " ".join(f"{k}=={v}" for k, v in sorted(got.items())))
    assert "triton" in got, got
    assert not {"triton-ascend", "torch-npu"} & set(got), got


def test_readme_and_docs_link_only_repository_files_and_public_urls():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith("https://"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.is_relative_to(REPO), f"{page.name} links outside the repository: {target}"
            assert path.exists(), f"{page.name} links a missing file: {target}"
        for url in re.findall(r"<(https?://[^>]+)>", text):
            assert url.startswith("https://"), f"{page.name}: {url}"
