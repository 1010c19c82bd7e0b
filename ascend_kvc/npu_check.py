"""NPU smoke check: does this installation run the operator on an Ascend NPU, and correctly?

    python -m ascend_kvc.npu_check              # the current NPU
    python -m ascend_kvc.npu_check --device npu:1

In about a minute (most of it compiling kernels): every route that runs on an NPU once on a small
case, judged byte for byte by the float64 oracle (``ascend_kvc.oracle``, on CPU copies); ``gpgpu``
refused on NPU tensors, as ``ascend_kvc.routes`` promises; the default route and ``fused``
captured into an NPU graph (torch-npu's ``torch.npu.NPUGraph``) and replayed on new input values;
one official-size case timed with NPU events. Then it prints one block to paste into an issue:
the environment report (``ascend_kvc.env``), the device, and PASS or FAIL for each check.

Exit status: 0 every check passed, 1 at least one failed, 3 no NPU here (torch-npu not
installed, or no NPU visible); 2 is argparse's, for bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import time
from dataclasses import dataclass

import torch

EXIT_OK, EXIT_FAILED, EXIT_NO_NPU = 0, 1, 3

# The small case each route runs (2 requests, 512 tokens, C=128: 4 outputs whose windows cross
# block edges, shuffled blocks and slots) and the timed one (an official case: 1 request, 8192
# tokens, C=512).
SMALL_CASE = (2, 512, 128)
BENCH_CASE = (1, 8192, 512)
BENCH_CALLS = 20


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str


def npu_absent_reason() -> str | None:
    """Why no NPU can be used here, or ``None`` when one can (imports torch-npu when installed)."""
    if importlib.util.find_spec("torch_npu") is None:
        return "torch-npu is not installed (an Ascend host installs it with the [npu] extra: docs/INSTALL.md)"
    import torch_npu  # noqa: F401  (registers torch.npu, when `import torch` did not already)

    if not torch.npu.is_available():
        return ("torch-npu is installed but sees no NPU (is CANN's set_env.sh sourced? does "
                "ASCEND_RT_VISIBLE_DEVICES hide them?)")
    return None


def npu_routes() -> list[str]:
    """The routes that run on NPU tensors: ``reference`` and every rung of the Ascend ladder."""
    from .routes import ROUTES

    return [name for name, route in ROUTES.items() if "npu" not in dict(route.refuses)]


def _workload(case: tuple[int, int, int], device, seed: int):
    from .workloads import make_workload

    num_reqs, tokens, C = case
    return make_workload(num_reqs, tokens, C, shuffle=True, nonzero_cache=True, seed=seed, device=device)


def _judge(w, got: torch.Tensor, before: torch.Tensor) -> tuple[bool, str]:
    """The oracle's verdict on ``got``, from CPU copies of every tensor."""
    from .oracle import check_cache

    on_cpu = dataclasses.replace(w, **{f.name: getattr(w, f.name).cpu() for f in dataclasses.fields(w)
                                        if isinstance(getattr(w, f.name), torch.Tensor)})
    report = check_cache(on_cpu.checked_args(), got.cpu(), before.cpu())
    return report.ok, str(report)


def check_route(route: str, device, npu, compress) -> tuple[bool, str]:
    w = _workload(SMALL_CASE, device, seed=11)
    before = w.kv_cache.clone()
    out = w.kv_cache.clone()
    compress(*w.args(), out=out, route=route)
    npu.synchronize()
    return _judge(w, out, before)


def check_gpgpu_refused(device, npu, compress) -> tuple[bool, str]:
    from .routes import RouteUnavailableError

    w = _workload(SMALL_CASE, device, seed=12)
    out = w.kv_cache.clone()
    try:
        compress(*w.args(), out=out, route="gpgpu")
    except RouteUnavailableError as e:
        return bool(torch.equal(out, w.kv_cache)), f"refused: {e}"
    return False, "route 'gpgpu' ran on NPU tensors; it must refuse them"


def check_graph(route: str, device, npu, compress) -> tuple[bool, str]:
    """Capture one call into an NPU graph, write new values into the captured inputs, replay."""
    w = _workload(SMALL_CASE, device, seed=13)
    out = w.kv_cache.clone()
    compress(*w.args(), out=out, route=route, validate=False)  # compile and plan outside the capture
    npu.synchronize()
    graph = npu.NPUGraph()
    with npu.graph(graph):
        compress(*w.args(), out=out, route=route, validate=False)
    g = torch.Generator().manual_seed(14)
    w.state_cache.copy_(torch.randn(w.state_cache.shape, generator=g).to(device))
    start = torch.randint(0, 256, out.shape, dtype=torch.uint8, generator=g).to(device)
    out.copy_(start)
    graph.replay()
    npu.synchronize()
    return _judge(w, out, start)


def check_bench(device, npu, compress, case: tuple[int, int, int] = BENCH_CASE,
                calls: int = BENCH_CALLS) -> tuple[bool, str]:
    """The default route on ``case``: judged first, then ``calls`` calls timed with NPU events."""
    w = _workload(case, device, seed=15)
    before = w.kv_cache.clone()
    out = w.kv_cache.clone()
    compress(*w.args(), out=out, validate=False)
    npu.synchronize()
    ok, verdict = _judge(w, out, before)
    if not ok:
        return False, f"{w.name}: {verdict}"  # no speed for wrong bytes
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        compress(*w.args(), out=out, validate=False)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end) / calls
    return True, (f"{w.name}, default route, validate=False: {ms:.3f} ms a call over {calls} calls, "
                  f"{w.bytes_to_move() / (ms * 1e-3) / 1e9:.1f} GB/s of the bytes that must move")


def run_checks(device, npu=None, compress=None, bench_case: tuple[int, int, int] = BENCH_CASE) -> list[CheckResult]:
    """Every check on ``device``, in order; an exception fails its check and the next one runs.
    ``npu``: the ``torch.npu`` module (by default); ``compress``: the operator (by default)."""
    from . import c128_256_512_compress

    npu = torch.npu if npu is None else npu
    compress = c128_256_512_compress if compress is None else compress
    device = torch.device(device) if isinstance(device, str) else device
    checks = [(f"route {r}", check_route, (r,)) for r in npu_routes()]
    if device.type == "npu":
        checks.append(("gpgpu refused", check_gpgpu_refused, ()))
    checks += [(f"graph {r}", check_graph, (r,)) for r in ("ascend", "ascend:fused")]
    checks.append(("bench", lambda dev, n, c: check_bench(dev, n, c, bench_case), ()))
    results = []
    for name, check, extra in checks:
        began = time.perf_counter()
        try:
            ok, detail = check(*extra, device, npu, compress)
        except Exception as e:  # a check that crashes is a failed check; the others still run
            ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        results.append(CheckResult(name, ok, f"{detail} [{time.perf_counter() - began:.1f} s]"))
    return results


def format_block(env_report: str, device_line: str, results: list[CheckResult]) -> str:
    """The text to paste into an issue: a fenced block with the environment, device and checks."""
    passed = sum(r.ok for r in results)
    lines = ["```text", "ascend_kvc NPU check", env_report, f"{'checked on':<18} {device_line}", "checks"]
    lines += [f"  {'PASS' if r.ok else 'FAIL'}  {r.name:<28} {r.detail}" for r in results]
    lines += [f"{'result':<18} {passed}/{len(results)} passed" + ("" if passed == len(results) else ", FAILED"),
              "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ascend_kvc.npu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="npu", help="the NPU to check (default: the current one)")
    args = parser.parse_args(argv)
    reason = npu_absent_reason()
    if reason is not None:
        print(f"ascend_kvc NPU check: no Ascend NPU here: {reason}.", file=sys.stderr)
        return EXIT_NO_NPU
    from .env import collect, format_report

    device = torch.device(args.device)
    index = device.index if device.index is not None else torch.npu.current_device()
    device = torch.device(device.type, index)
    results = run_checks(device)
    print(format_block(format_report(collect(devices=True)), f"{device} ({torch.npu.get_device_name(index)})",
                       results))
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
