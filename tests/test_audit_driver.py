"""The lowering audit's driver on stand-ins for the tool chain: a compiler crash is tried again, a
compile error or a crash every time is the kernel's result (no triton-ascend needed)."""

from types import SimpleNamespace

import pytest

from tools.ascend_lowering import analyse, driver
from tools.ascend_lowering import toolchain as cc

CRASH = "MLIRCompilationError: [ConvertTritonIRToLinalgIR] encounters error:\nStack dump:\n0. Program arguments: ..."
SPEC = {"kernel": "_stand_in_kernel", "hot_depth": 2, "constexprs": {}, "pointer_types": {}}


@pytest.fixture
def toolchain(tmp_path, monkeypatch):
    outcomes: list[tuple] = []
    calls = []

    def front_end(spec, work):
        calls.append(spec["kernel"])
        return outcomes.pop(0)

    monkeypatch.setattr(driver, "build_dir", lambda: tmp_path)
    monkeypatch.setattr(driver, "bishengir_binary", lambda: tmp_path / "bishengir-compile")
    monkeypatch.setattr(cc, "load_kernel", lambda spec: SimpleNamespace(cache_key=f"{spec['kernel']}-{len(calls)}"))
    monkeypatch.setattr(cc, "front_end", front_end)
    monkeypatch.setattr(cc, "bishengir", lambda linalg, work, binary: {"compiler": "reached", "ub_bits": 1})
    monkeypatch.setattr(analyse, "analyse_linalg", lambda linalg, hot_depth: {"copies": []})
    return outcomes, calls


def test_a_front_end_crash_is_tried_again(toolchain):
    outcomes, calls = toolchain
    outcomes += [(None, CRASH), ("module {}", "")]
    res = driver._compile_one(SPEC, {}, [])
    assert res["front_end"] and res["front_end_crashes"] == 1 and len(calls) == 2
    assert res["compiler"] == "reached"


def test_a_crash_every_time_is_the_result(toolchain):
    outcomes, calls = toolchain
    outcomes += [(None, CRASH)] * (driver.FRONT_END_CRASH_RETRIES + 1)
    res = driver._compile_one(SPEC, {}, [])
    assert not res["front_end"] and res["front_end_crashes"] == driver.FRONT_END_CRASH_RETRIES
    assert "Stack dump" in res["front_end_error"] and len(calls) == driver.FRONT_END_CRASH_RETRIES + 1


def test_a_compile_error_is_not_tried_again(toolchain):
    outcomes, calls = toolchain
    outcomes += [(None, "CompilationError: unsupported op")]
    res = driver._compile_one(SPEC, {}, [])
    assert not res["front_end"] and res["front_end_crashes"] == 0 and len(calls) == 1
