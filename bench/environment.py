"""The versions a report names, from one adapter.

``library_environment`` asks the library's own environment report (``ascend_kvc.env``) when the
installed ascend_kvc has one, and otherwise falls back to ``bench.machine.machine_info``. This is
the only place the benchmark reads versions, so switching the source is a one-line change here.
"""

from __future__ import annotations

import importlib

# The function of ``ascend_kvc.env`` that returns the environment as a dict.
LIBRARY_ENV_FUNCTION = "environment_report"


def library_environment(device: str) -> dict:
    """Machine and version facts for ``device``: name, torch, triton, driver/CANN, commit, date..."""
    from bench.machine import machine_info

    info = machine_info(device)
    try:
        env_module = importlib.import_module("ascend_kvc.env")
    except ImportError:
        info["versions_from"] = "bench.machine"
        return info
    report = getattr(env_module, LIBRARY_ENV_FUNCTION, None)
    if report is None:
        info["versions_from"] = f"bench.machine (ascend_kvc.env has no {LIBRARY_ENV_FUNCTION}())"
        return info
    extra = report()
    info["library_env"] = {str(k): v for k, v in dict(extra).items()}
    info["versions_from"] = f"ascend_kvc.env.{LIBRARY_ENV_FUNCTION}()"
    return info
