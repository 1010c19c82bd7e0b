"""The conservative default stays lean: few device launches, a real bf16 tensor, exact exponents."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress, reference
from ascend_kvc.api import clear_launch_plans
from ascend_kvc.stages import finalize
from ascend_kvc.stages import plan as plan_module

from cases import general_case, run_and_check
from launches import OpCounter, record_triton_launches

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MAX_KERNELS_BYTE_SCATTER = 12


def test_byte_scatter_runs_at_most_12_kernels_and_quantises_a_real_bf16_tensor():
    w = general_case(128, 8, seed=5, num_reqs=1, outputs_per_req=2, device=DEVICE)
    out = w.kv_cache.clone()
    c128_256_512_compress(*w.args(), out=out, route="ascend:byte-scatter", validate=False)  # compile / warm up
    with record_triton_launches() as launches, OpCounter() as ops:
        c128_256_512_compress(*w.args(), out=out, route="ascend:byte-scatter", validate=False)
    kernels = len(ops.ops) + len(launches)
    assert kernels <= MAX_KERNELS_BYTE_SCATTER, f"{kernels} kernels: {ops.ops} + {[k for k, _ in launches]}"
    assert [k for k, _ in launches] == ["_block_gather_softmax_kernel", "_byte_scatter_kernel"]
    assert ("_to_copy", torch.bfloat16) in ops.out_dtypes  # the framework's own cast makes the boundary
    assert not {"log2", "exp2", "pow", "index_put", "index_put_", "nonzero"} & set(ops.ops)


# (route, cores, kernels a call launches): 2 outputs on 1 core run unsplit, on 8 cores split; on
# 2 cores, one window each, they split too: each program owns its core, and the piece gather reads
# wider row tiles than the unsplit kernels at block size 8.
_SPLIT_DEFAULT = ["_window_piece_kernel", "_merge_to_bf16_kernel", "_quantize_bf16_kernel", "_byte_scatter_kernel"]
_PLANNED_LAUNCHES = [
    ("ascend", 1, ["_gather_to_bf16_kernel", "_quantize_bf16_kernel", "_byte_scatter_kernel"]),
    ("ascend", 2, _SPLIT_DEFAULT),
    ("ascend", 8, _SPLIT_DEFAULT),
    ("ascend:fused", 1, ["_fused_compress_kernel"]),
    ("ascend:fused", 2, ["_window_piece_kernel", "_merge_to_slot_kernel"]),
    ("ascend:fused", 8, ["_window_piece_kernel", "_merge_to_slot_kernel"]),
]


@pytest.mark.parametrize("route,cores,kernels", _PLANNED_LAUNCHES)
def test_default_and_fused_launch_few_kernels_and_no_framework_op(route, cores, kernels, monkeypatch):
    """The default: at most 4 launches (gather, quantise, scatter, plus the merge of a split), the
    gather's output a bf16 tensor; fused: 1, or 2 when split. No framework op on a repeat call."""
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(cores))
    clear_launch_plans()
    w = general_case(128, 8, seed=6, num_reqs=1, outputs_per_req=2, device=DEVICE)
    out = w.kv_cache.clone()
    # A plan's first call goes through kernel[grid] (recorded); on a GPU, repeat calls launch the
    # compiled kernels directly, past the recorder, so the framework ops are counted on a repeat.
    with record_triton_launches() as launches:
        c128_256_512_compress(*w.args(), out=out, route=route, validate=False)
    with record_triton_launches(), OpCounter() as ops:  # the recorder keeps the interpreter's copies out
        c128_256_512_compress(*w.args(), out=out, route=route, validate=False)
    assert [k for k, _ in launches] == kernels
    assert len(kernels) <= 4
    assert ops.ops == []


@pytest.mark.parametrize("route,kernels", [
    ("ascend", ["_gather_to_bf16_kernel", "_quantize_bf16_kernel", "_byte_scatter_kernel"]),
    ("ascend:fused", ["_fused_compress_kernel"]),
])
def test_split_rule_occupancy_keeps_whole_windows_that_share_out(route, kernels, monkeypatch):
    """ASCEND_KVC_SPLIT=occupancy: 2 outputs on 2 cores run one window a program again (the
    default rule splits them, above), with the oracle's bytes; a bad value is refused by name."""
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", "2")
    monkeypatch.setenv("ASCEND_KVC_SPLIT", "occupancy")
    clear_launch_plans()
    w = general_case(128, 8, seed=6, num_reqs=1, outputs_per_req=2, device=DEVICE)
    with record_triton_launches() as launches:
        run_and_check(w, route, validate=False)
    assert [k for k, _ in launches] == kernels
    monkeypatch.setenv("ASCEND_KVC_SPLIT", "never")
    for own_cores in (True, False):  # refused whether or not programs own their cores (a GPU's own grid)
        monkeypatch.setattr(plan_module, "programs_own_cores", lambda device, own=own_cores: own)
        clear_launch_plans()
        out = w.kv_cache.clone()
        with pytest.raises(ValueError, match="ASCEND_KVC_SPLIT"):
            c128_256_512_compress(*w.args(), out=out, route=route, validate=False)
        assert torch.equal(out, w.kv_cache)
    clear_launch_plans()


@pytest.mark.parametrize("stage", ASCEND_STAGES)
def test_empty_cos_sin_cache_without_validation_writes_nothing(stage):
    w = general_case(128, 8, seed=8, num_reqs=1, outputs_per_req=2, device=DEVICE)
    w.cos_sin_cache = w.cos_sin_cache[:0]
    out = w.kv_cache.clone()
    assert c128_256_512_compress(*w.args(), out=out, route=f"ascend:{stage}", validate=False) is out
    assert torch.equal(out, w.kv_cache)
    with pytest.raises(ValueError, match="cos_sin_cache"):
        c128_256_512_compress(*w.args(), out=out, route=f"ascend:{stage}")


def _edge_groups() -> torch.Tensor:
    """bf16 rows whose group maxima sit on every edge of the exponent: powers of two times 127,
    all-ones mantissas, the 1e-4 floor, zeros, negatives, tiny and huge values."""
    g = torch.Generator().manual_seed(0)
    amax = [0.0, 1e-30, 9.9e-5, 1e-4, 1.01e-4, 127.0, 254.0, 127.0 * 2**-20, 127.0 * 2**-21, 1.0, 1.9921875,
            3.984375, 0.5, 1e30, 3.0e38, 2.0**-126, 65504.0, 126.99, 127.01]
    rows = []
    for i in range(0, len(amax), 7):
        row = torch.randn(512, generator=g) * 0.1
        for k, a in enumerate(amax[i:i + 7]):
            grp = torch.rand(64, generator=g) * 2 - 1
            grp = grp * a
            grp[k] = -a if k % 2 else a
            row[k * 64:(k + 1) * 64] = grp
        rows.append(row)
    return torch.stack(rows).to(torch.bfloat16)


def test_quantize_nope_matches_float64_log2_reference():
    y = _edge_groups()
    q, scale = finalize.quantize_nope(y)
    q_ref, e_ref = reference.quantize_nope(y.double())  # float64 log2/exp2: exact at these values
    assert torch.equal(q.view(-1, 448), q_ref)
    assert torch.equal(scale.view(-1, 7).double() - 127, e_ref)


_FUSED_TTIR = """
import inspect, sys, torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import importlib
from ascend_kvc.stages import kernel_specializations
spec = kernel_specializations("fused", 8, 128, torch.float32, split=SPLIT)[-1]
fn = getattr(importlib.import_module(spec.module), spec.kernel)
sig = {n: "constexpr" if n in spec.constexprs else spec.pointer_dtypes.get(
    n, "*i64" if n.endswith("_ptr") else "fp32" if n == "eps" else "i32") for n in inspect.signature(fn.fn).parameters}
src = ASTSource(fn=fn, signature=sig, constexprs=dict(spec.constexprs))
sys.stdout.write(triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ttir"])
"""


def _fused_ttir(split: bool) -> str:
    """Triton IR of the kernel that writes fused's slot bytes (the fused kernel, or the merge of a
    split window; fp32 state, block_size 8, C 128) for an sm_90 target, compiled in a child
    process without the interpreter (no GPU needed)."""
    pytest.importorskip("triton.backends.nvidia.compiler", reason="needs community Triton's CUDA back end")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", f"SPLIT = {split}\n" + _FUSED_TTIR], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("split", [False, True])
def test_fused_kernel_reshapes_nothing_into_pairs(split):
    """bishengir-compile pads every dim of an int8 cast's buffers to 32; a [.., 2] reshape (a
    tl.split/tl.join of the RoPE pairs) spreads to the [8, 64] quantised block and took the fused
    kernel to ~530 KiB of the 910B's 192 KiB unified buffer. Keep the pair shuffles out of it."""
    ttir = _fused_ttir(split)
    pairs = [ln.strip() for ln in ttir.splitlines()
             if re.search(r"tt\.(split|join)\b", ln) or re.search(r"tt\.reshape .*-> tensor<(\d+x)*2x", ln)]
    assert "tt.reshape" in ttir  # c as [8, 64]: the check sees the reshapes
    assert not pairs, "\n".join(pairs)


@pytest.mark.parametrize("cores", [1, 8])
@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])
def test_volatile_row_loads_only_in_cuda_plans(route, cores, monkeypatch):
    """Every kernel spec, which is what the Ascend audit compiles and an NPU runs, reads state rows
    with plain loads; a launch plan switches its window loops to volatile loads on CUDA only."""
    from ascend_kvc import api
    from ascend_kvc.stages import VOLATILE_ROWS_ON_CUDA, kernel_specializations

    for stage in ASCEND_STAGES:
        for split in (False, True) if stage in ("triton-quant", "fused") else (False,):
            for spec in kernel_specializations(stage, 8, 128, torch.float32, split=split):
                assert spec.constexprs.get("VOLATILE_ROWS", False) is False, (stage, spec.kernel)
            for spec in kernel_specializations(stage, 8, 128, torch.float32, split=split, device_type="cuda"):
                kind = "piece" if spec.kernel == "_window_piece_kernel" else "unsplit"
                looped = "VOLATILE_ROWS" in spec.constexprs and stage in ("triton-quant", "fused")
                assert spec.constexprs.get("VOLATILE_ROWS", False) is (looped and VOLATILE_ROWS_ON_CUDA[kind]), \
                    (stage, spec.kernel)
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(cores))
    clear_launch_plans()
    w = general_case(128, 8, seed=6, num_reqs=1, outputs_per_req=2, device=DEVICE)
    c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, validate=False)
    (plan,) = [p for k, p in api._PLANS.items() if k[0] == route]
    looped = {launcher.kernel.fn.__name__: launcher.constexprs["VOLATILE_ROWS"]
              for launcher, _, _ in plan.launches if "VOLATILE_ROWS" in launcher.constexprs}
    assert len(looped) == 1  # the gather, or the piece gather of a split
    (kernel, volatile), = looped.items()
    kind = "piece" if kernel == "_window_piece_kernel" else "unsplit"
    assert volatile is (DEVICE == "cuda" and VOLATILE_ROWS_ON_CUDA[kind])
    clear_launch_plans()
