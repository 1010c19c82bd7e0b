"""The Ascend ladder runs exactly the kernels ``stages.kernel_specializations`` names."""

import importlib
import inspect

import pytest
import torch

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress
from ascend_kvc.api import clear_launch_plans
from ascend_kvc.routes import ASCEND_PLANNED_STAGES
from ascend_kvc.stages import KernelSpec, kernel_specializations
from ascend_kvc.stages.work_split import plan_split

from cases import general_case
from launches import record_triton_launches

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


# The planned rungs launch other kernels when they split windows: both ways for them.
_STAGE_CORES = [(stage, cores) for stage in ASCEND_STAGES
                for cores in ((1, 8) if stage in ASCEND_PLANNED_STAGES else (1,))]


@pytest.mark.parametrize("stage,cores", _STAGE_CORES)
@pytest.mark.parametrize("block_size,state_dtype", [(8, torch.float32), (3, torch.bfloat16)])
def test_launches_are_the_specializations(stage, cores, block_size, state_dtype, monkeypatch):
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(cores))
    clear_launch_plans()
    w = general_case(128, block_size, seed=7, num_reqs=1, outputs_per_req=1, device=DEVICE, state_dtype=state_dtype)
    split = stage in ASCEND_PLANNED_STAGES and plan_split(w.boundary_token_indices.numel(), 128, cores).split
    assert split == (cores == 8 and stage in ASCEND_PLANNED_STAGES)
    specs = kernel_specializations(stage, block_size, 128, state_dtype, split=split, device_type=DEVICE)
    assert all(isinstance(s, KernelSpec) for s in specs)
    with record_triton_launches() as launches:
        c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=f"ascend:{stage}", validate=False)
    assert [name for name, _ in launches] == [s.kernel for s in specs]
    for (name, kwargs), spec in zip(launches, specs):
        assert {k: kwargs[k] for k in spec.constexprs} == spec.constexprs, name
        params = inspect.signature(getattr(importlib.import_module(spec.module), spec.kernel).fn).parameters
        constexpr_params = {n for n, p in params.items() if "constexpr" in str(p.annotation)}
        assert set(spec.constexprs) == constexpr_params, name
        assert set(spec.pointer_dtypes) == {n for n in params if n.endswith("_ptr")}, name
        state = "*bf16" if state_dtype == torch.bfloat16 else "*fp32"
        assert spec.pointer_dtypes.get("state_ptr", spec.pointer_dtypes.get("rows_ptr", state)) == state


def test_specializations_reject_unknown_stage_and_bad_block_size():
    with pytest.raises(ValueError, match="stage"):
        kernel_specializations("warp-drive", 8, 128, torch.float32)
    with pytest.raises(ValueError, match="block_size"):
        kernel_specializations("byte-scatter", 0, 128, torch.float32)
    with pytest.raises(ValueError, match="split"):
        kernel_specializations("byte-scatter", 8, 128, torch.float32, split=True)
