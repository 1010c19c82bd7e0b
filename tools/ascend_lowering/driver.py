"""Run the audit: unique specialisations, compiled in parallel worker processes, cached by source.

triton-ascend 3.2.0 and community Triton both install the package ``triton``, so the compiling
happens in worker processes whose ``PYTHONPATH`` puts the side folder ``.ascend-triton/`` first
(``make`` installs triton-ascend and ascendnpu-ir there); torch comes from the normal environment.
Each worker reads one specialisation per line on stdin and answers one JSON line.

Everything the audit writes goes under ``build/ascend-audit/`` in the checkout: per
specialisation a folder with its Triton cache, the Linalg module, the compiler's log and memory
plan, and a result file keyed by a hash of the kernel's source (with the Triton functions it
calls), the specialisation, the tool versions and the compiler flags. A fresh checkout compiles
everything; a repeat run with unchanged kernels reads the results back.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from ascend_kvc.layout import HEAD_DIM

from . import matrix as mx

REPO = Path(__file__).resolve().parents[2]
AUDIT_FORMAT = 3  # bump when a result's meaning changes, to invalidate cached results


def build_dir() -> Path:
    return Path(os.environ.get("ASCEND_AUDIT_BUILD", REPO / "build" / "ascend-audit"))


def ascend_triton_path() -> Path:
    return Path(os.environ.get("ASCEND_TRITON_PATH", REPO / ".ascend-triton"))


def bishengir_binary() -> Path:
    return ascend_triton_path() / "ascendnpuir" / "bin" / "bishengir-compile"


def check_install() -> None:
    side = ascend_triton_path()
    if not (side / "triton").is_dir():
        raise RuntimeError(f"triton-ascend not found in {side}; `make audit` (or `make test`) installs it there")
    if not os.access(bishengir_binary(), os.X_OK):
        raise RuntimeError(f"bishengir-compile not found at {bishengir_binary()}; "
                           "`make audit` installs ascendnpu-ir there")


# ---------------------------------------------------------------- worker (triton-ascend on the path)

def _versions() -> dict:
    from importlib import metadata

    side = str(ascend_triton_path())
    return {dist: next(metadata.distributions(name=dist, path=[side])).version
            for dist in ("triton_ascend", "ascendnpu_ir")}


# triton-ascend 3.2.0's triton-adapter-opt has crashed (an LLVM stack dump, no diagnostic) on an
# input that compiled on the next three tries, on a loaded 2-core machine. A crash is tried again
# up to this many times; a compile error, or a crash every time, is the kernel's result.
FRONT_END_CRASH_RETRIES = 2


def _crashed(error: str | None) -> bool:
    return bool(error) and "Stack dump:" in error


def _compile_one(spec: dict, versions: dict, flags: list[str]) -> dict:
    from . import analyse, toolchain as cc

    fn = cc.load_kernel(spec)
    key_blob = json.dumps([AUDIT_FORMAT, fn.cache_key, spec, versions, flags], sort_keys=True, default=str)
    cache_key = hashlib.sha256(key_blob.encode()).hexdigest()[:24]
    work = build_dir() / "kernels" / f"{spec['kernel'].strip('_')}-{cache_key}"
    result_file = work / "result.json"
    if result_file.is_file():
        cached = json.loads(result_file.read_text())
        cached["cached"] = True
        return cached
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    t = time.perf_counter()
    linalg, error = cc.front_end(spec, work)
    crashes = 0
    while linalg is None and _crashed(error) and crashes < FRONT_END_CRASH_RETRIES:
        crashes += 1  # the same input again: a crash that repeats is recorded as the failure it is
        linalg, error = cc.front_end(spec, work)
    res = {"front_end": linalg is not None, "front_end_error": error, "front_end_crashes": crashes,
           "front_end_s": round(time.perf_counter() - t, 2), "analysis": None,
           "compiler": cc.NOT_RUN, "compiler_message": "", "ub_bits": None, "ub_available_bits": None}
    if linalg is not None:
        (work / "kernel.ttadapter").write_text(linalg)
        found = analyse.analyse_linalg(linalg, hot_depth=spec["hot_depth"])
        found["copies"] = [asdict(c) for c in found["copies"]]
        res["analysis"] = found
        res.update(cc.bishengir(linalg, work, bishengir_binary()))
    res["work_dir"] = str(work.relative_to(build_dir()))
    res["cached"] = False
    result_file.write_text(json.dumps(res, indent=1))
    return res


def worker() -> int:
    """Compile the specialisations named on stdin, one JSON line each way."""
    # Keep the answer channel clean: the tool chain prints to stdout.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    tmp = build_dir() / "tmp" / str(os.getpid())
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(tmp)
    import tempfile

    tempfile.tempdir = str(tmp)
    from . import toolchain as cc

    versions, flags = _versions(), cc.compiler_flags()
    try:
        for line in sys.stdin:
            spec = json.loads(line)
            try:
                res = _compile_one(spec, versions, flags)
            except Exception as exc:  # a broken specialisation is a result, not the end of the audit
                res = {"front_end": False, "front_end_error": f"{type(exc).__name__}: {exc}", "analysis": None,
                       "compiler": cc.NOT_RUN, "compiler_message": "", "ub_bits": None, "ub_available_bits": None}
            res["versions"] = versions
            res["flags"] = flags
            answers.write(json.dumps(res) + "\n")
            answers.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            tmp.parent.rmdir()  # the last worker out removes tmp/
        except OSError:
            pass
    return 0


# ---------------------------------------------------------------- parent

def _worker_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ascend_triton_path()), str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("TRITON_INTERPRET", None)
    env["ASCEND_AUDIT_BUILD"] = str(build_dir())
    return env


def compile_specs(specs: list[mx.Spec], jobs: int | None = None) -> dict[str, dict]:
    """``spec.key -> result`` for every spec, compiled by ``jobs`` workers pulling from one queue."""
    check_install()
    jobs = max(1, min(jobs or default_jobs(), len(specs) or 1))
    # Large tiles first, so the slowest compiles do not end up last on one worker.
    queue = sorted(specs, key=lambda s: -_weight(s))
    lock = threading.Lock()
    results: dict[str, dict] = {}
    failures: list[str] = []
    env = _worker_env()

    def run_worker() -> None:
        proc = subprocess.Popen([sys.executable, "-m", "tools.ascend_lowering", "--worker"], cwd=REPO, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stderr: list[str] = []
        drain = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
        drain.start()
        try:
            while True:
                with lock:
                    if not queue or failures:
                        break
                    spec = queue.pop(0)
                proc.stdin.write(json.dumps(spec.as_dict()) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    with lock:
                        failures.append(f"worker died on {spec.as_dict()}:\n{''.join(stderr)[-4000:]}")
                    break
                with lock:
                    results[spec.key] = json.loads(line)
        finally:
            proc.stdin.close()
            proc.wait(timeout=120)
            drain.join(timeout=5)

    threads = [threading.Thread(target=run_worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError(failures[0])
    return results


def default_jobs() -> int:
    """One worker per usable core, at most 8 (each holds torch and triton-ascend in memory)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def _weight(spec: mx.Spec) -> int:
    """Rough compile cost: the state tile's elements (a kernel without BLOCK_D owns the whole head)."""
    cx = dict(spec.constexprs)
    rows = cx.get("ROW_TILE", cx.get("BLOCK_BS", cx.get("BLOCK_T", 1)))
    dims = cx.get("BLOCK_D", HEAD_DIM if "ROW_TILE" in cx else 1)
    return int(rows) * int(dims)


def run_audit(jobs: int | None = None, scope: str = "full") -> dict:
    """The matrix of ``scope`` (``matrix.SCOPES``): ``{"entries": [...], "results": {key: result},
    "seconds": ..., "scope": scope}``."""
    t = time.perf_counter()
    entries = mx.build_matrix(scope)
    specs = mx.unique_specs(entries)
    jobs = jobs or default_jobs()
    # One audit at a time per build folder (two test workers may ask at once): the second waits,
    # then reads the first one's results back.
    build_dir().mkdir(parents=True, exist_ok=True)
    with open(build_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = compile_specs(specs, jobs)
    for s in specs:
        results[s.key]["spec"] = s.as_dict()
    rows = [{"stage": e.stage, "C": e.C, "block_size": e.block_size, "state_dtype": e.state_dtype,
             "kernels": [s.key for s in e.specs]} for e in entries]
    return {"entries": rows, "results": results, "seconds": round(time.perf_counter() - t, 1), "scope": scope,
            "jobs": jobs, "specialisations": len(specs), "compiled": sum(not r.get("cached") for r in results.values())}
