"""The versions a report names, from one adapter.

``library_environment`` starts from ``bench.machine.machine_info`` (device name, driver, the
commit, the date) and, where the installed ascend_kvc has its environment report
(``ascend_kvc.env.collect``), takes the package versions from it: which Triton ``import triton``
loads (community or triton-ascend), torch-npu, triton-ascend, CANN. The full report is kept for
report.md. This is the only place the benchmark reads versions.
"""

from __future__ import annotations

import importlib


def _text(value) -> str | None:
    """A probe's answer as one short string; None for absent, the message for an error."""
    if value is None:
        return None
    if isinstance(value, dict):
        if "error" in value:
            return f"({value['error']})"
        return value.get("version") and str(value["version"])
    return str(value)


def library_environment(device: str) -> dict:
    """Machine and version facts for ``device``: name, torch, triton, driver/CANN, commit, date..."""
    from bench.machine import machine_info

    info = machine_info(device)
    try:
        env = importlib.import_module("ascend_kvc.env")
    except ImportError:
        info["versions_from"] = "bench.machine"
        return info
    try:
        report = env.collect(devices=True)
        text = env.format_report(report)
    except Exception as exc:  # the benchmark runs on without it, and says so
        info["versions_from"] = f"bench.machine (ascend_kvc.env failed: {type(exc).__name__}: {exc})"
        return info
    info["versions_from"] = "ascend_kvc.env"
    info["library_env_text"] = text
    triton = report.get("triton") or {}
    if triton.get("version"):
        info["triton"] = f"{triton['version']} ({triton.get('kind', triton.get('distribution', '?'))})"
    for key in ("torch_npu", "triton_ascend", "cann"):
        value = _text(report.get(key))
        if value:
            info[key] = value
    if report.get("triton_conflict"):
        info["triton_conflict"] = str(report["triton_conflict"])
    return info
