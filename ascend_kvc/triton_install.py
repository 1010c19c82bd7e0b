"""Which Triton is installed: community Triton, triton-ascend, or a broken mix of both.

Community Triton (for NVIDIA/AMD GPUs and the CPU interpreter) and triton-ascend (for Ascend
NPUs) both install the top-level package ``triton``. Installed into the same directory, the later
one overwrites part of the earlier and the result is neither; ``import ascend_kvc`` calls
``check_triton_install()`` so that this shows up as one clear error instead of a confusing one
deep inside a kernel launch.

Everything here reads installed-package metadata only (about half a millisecond): no ``import
triton``, no device, no subprocess. That is why the check can run at import time without breaking
the rule that importing ascend_kvc does nothing observable.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass

# Distributions that install the top-level package ``triton``.
COMMUNITY_TRITON = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")
TRITON_ASCEND = "triton-ascend"


def normalise(name: str) -> str:
    """A distribution name in its canonical form (``Triton_Ascend`` -> ``triton-ascend``)."""
    return name.lower().replace("_", "-").replace(".", "-")


@dataclass(frozen=True)
class Dist:
    name: str
    version: str
    location: str  # the directory the distribution was installed into (a site-packages, a --target)

    @property
    def is_ascend(self) -> bool:
        return normalise(self.name) == TRITON_ASCEND


def find_distributions(names, path: list[str] | None = None) -> list[Dist]:
    """Installed distributions called any of ``names``, on ``path`` (default ``sys.path``)."""
    found: dict[tuple[str, str], Dist] = {}
    for name in names:
        # Both spellings: older importlib.metadata matches dist-info folder names literally.
        for spelling in {name, name.replace("-", "_")}:
            kwargs = {"name": spelling} if path is None else {"name": spelling, "path": path}
            for dist in importlib.metadata.distributions(**kwargs):
                location = os.path.realpath(str(dist.locate_file("")))
                d = Dist(dist.metadata["Name"] or name, dist.version, location)
                found.setdefault((normalise(d.name), location), d)
    return list(found.values())


def triton_distributions(path: list[str] | None = None) -> list[Dist]:
    """Every installed distribution that provides the package ``triton``."""
    return find_distributions((*COMMUNITY_TRITON, TRITON_ASCEND), path)


class TritonConflictError(ImportError):
    """Community Triton and triton-ascend share one install directory: ``triton`` there is a mix."""


def triton_conflict(dists: list[Dist] | None = None) -> str | None:
    """Why the installed Tritons cannot work, or ``None`` when they can.

    Installed into different directories (triton-ascend in a side folder first on ``PYTHONPATH``,
    as this repository's lowering audit does) one shadows the other: deliberate and fine.
    """
    dists = triton_distributions() if dists is None else dists
    for a in (d for d in dists if d.is_ascend):
        for c in (d for d in dists if not d.is_ascend):
            if a.location == c.location:
                return (
                    f"community Triton ({c.name} {c.version}) and {a.name} {a.version} are both installed in "
                    f"{a.location}. Both install the package 'triton', so the files there are a mix of the "
                    "two and neither works. Fix: `pip uninstall -y triton triton-ascend`, then on an Ascend "
                    f"host `pip install {a.name}=={a.version}` (or ascend_kvc's [npu] extra), on any other "
                    "host `pip install triton` (or the [cuda] / [cpu] extra). docs/INSTALL.md in the "
                    "ascend_kvc repository explains."
                )
    return None


def check_triton_install() -> None:
    """Raise ``TritonConflictError`` when community Triton and triton-ascend share a directory."""
    reason = triton_conflict()
    if reason is not None:
        raise TritonConflictError("ascend_kvc: " + reason)


def active_triton(dists: list[Dist] | None = None) -> dict:
    """Which distribution ``import triton`` would load, found without importing it."""
    dists = triton_distributions() if dists is None else dists
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return {"installed": False}
    package_dir = os.path.realpath(list(spec.submodule_search_locations)[0])
    owners = [d for d in dists if os.path.dirname(package_dir) == d.location]
    owners.sort(key=lambda d: not d.is_ascend)  # in a mixed directory, name triton-ascend first
    if not owners:
        return {"installed": True, "path": package_dir, "distribution": "unknown"}
    owner = owners[0]
    return {"installed": True, "path": package_dir, "distribution": owner.name,
            "kind": "triton-ascend" if owner.is_ascend else "community", "version": owner.version}
