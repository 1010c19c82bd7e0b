"""``python -m tools.ascend_lowering [--quick] [--json PATH] [--jobs N]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __doc__ as package_doc
from . import driver, report
from . import matrix as mx


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.ascend_lowering", description=package_doc.split("\n\n")[0])
    p.add_argument("--json", metavar="PATH", help="write the full report (matrix entries and per-kernel results)")
    p.add_argument("--jobs", type=int, default=None,
                   help="parallel compiler processes (default: usable cores, at most 8)")
    p.add_argument("--quick", action="store_true",
                   help="every stage once (C=128, block size 64, float32 state), as make test audits; "
                        "default: the whole matrix")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        return driver.worker()
    rep = driver.run_audit(a.jobs, "quick" if a.quick else "full")
    any_result = next(iter(rep["results"].values()), {})
    versions = any_result.get("versions", {})
    print(f"Ascend lowering audit: triton-ascend {versions.get('triton_ascend', '?')} front end, then "
          f"bishengir-compile (ascendnpu-ir {versions.get('ascendnpu_ir', '?')}) for "
          f"{report.TARGET_ARCH}: {' '.join(any_result.get('flags', []))}")
    where = driver.build_dir()
    where = where.relative_to(driver.REPO) if where.is_relative_to(driver.REPO) else where
    print(f"{len(rep['entries'])} matrix entries ({rep['scope']} scope), {rep['specialisations']} distinct "
          f"specialisations ({rep['compiled']} compiled now, the rest read back from {where}/), {rep['seconds']} s on "
          f"{rep['jobs']} worker processes\n")
    print(report.format_table(rep))
    block_size = 8 if rep["scope"] == "full" else mx.QUICK_BLOCK_SIZE
    print(f"\nData movement in the Linalg module (block_size {block_size}, float32 state):\n")
    print(report.format_data_movement(rep, block_size))
    if a.json:
        Path(a.json).write_text(json.dumps(rep, indent=1))
    bad = report.problems(rep)
    for line in bad:
        print("FAIL:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
