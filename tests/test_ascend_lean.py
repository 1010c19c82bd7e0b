"""The conservative default stays lean: few device launches, a real bf16 tensor, exact exponents."""

import pytest
import torch

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress
from ascend_kvc import finalize, reference

from cases import general_case
from launches import OpCounter, record_triton_launches

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MAX_KERNELS_BYTE_SCATTER = 12


def test_byte_scatter_runs_at_most_12_kernels_and_quantises_a_real_bf16_tensor():
    w = general_case(128, 8, seed=5, num_reqs=1, outputs_per_req=2, device=DEVICE)
    out = w.kv_cache.clone()
    c128_256_512_compress(*w.args(), out=out, route="ascend", validate=False)  # compile / warm up
    with record_triton_launches() as launches, OpCounter() as ops:
        c128_256_512_compress(*w.args(), out=out, route="ascend", validate=False)
    kernels = len(ops.ops) + len(launches)
    assert kernels <= MAX_KERNELS_BYTE_SCATTER, f"{kernels} kernels: {ops.ops} + {[k for k, _ in launches]}"
    assert [k for k, _ in launches] == ["_block_gather_softmax_kernel", "_byte_scatter_kernel"]
    assert ("_to_copy", torch.bfloat16) in ops.out_dtypes  # the framework's own cast makes the boundary
    assert not {"log2", "exp2", "pow", "index_put", "index_put_", "nonzero"} & set(ops.ops)


def test_fused_is_one_launch_and_no_framework_op():
    w = general_case(128, 8, seed=6, num_reqs=1, outputs_per_req=2, device=DEVICE)
    out = w.kv_cache.clone()
    c128_256_512_compress(*w.args(), out=out, route="ascend:fused", validate=False)
    with record_triton_launches() as launches, OpCounter() as ops:
        c128_256_512_compress(*w.args(), out=out, route="ascend:fused", validate=False)
    assert [k for k, _ in launches] == ["_fused_compress_kernel"]
    assert ops.ops == []


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
