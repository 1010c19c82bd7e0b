"""The registered op ``torch.ops.ascend_kvc.compress_`` and the layer that calls it.

On CPU the Triton routes run under the interpreter (tiny shapes); the ``cuda`` tests add
CUDA-graph capture and ``torch.compile`` on a GPU.
"""

import re

import pytest
import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.layers import CompressorKVWriter
from ascend_kvc.oracle import check_cache

from cases import general_case

ON_NPU = hasattr(torch, "npu") and torch.npu.is_available()
DEVICE = "cuda" if torch.cuda.is_available() else "npu" if ON_NPU else "cpu"
# One Triton route of each family; gpgpu is not promised on an NPU.
TRITON_ROUTES = ["ascend"] + ([] if ON_NPU else ["gpgpu"])

OP = torch.ops.ascend_kvc.compress_


def _tiny(device=DEVICE, seed=5, C=128):
    # Two outputs (one skipped by a -1 slot) across shuffled blocks: enough for every code path.
    return general_case(C, 8, num_reqs=1, outputs_per_req=3, seed=seed, device=device)


def _op_args(w, out, route, validate=True):
    return (w.state_cache, w.token_to_req, w.positions, w.boundary_token_indices, w.block_table,
            w.rms_norm_weight, w.cos_sin_cache, w.kv_slot_mapping, out,
            w.block_size, w.compress_ratio, w.rms_norm_eps, route, validate)


def _layer(w, route, validate=False):
    return CompressorKVWriter(w.rms_norm_weight, w.cos_sin_cache, block_size=w.block_size,
                              compress_ratio=w.compress_ratio, rms_norm_eps=w.rms_norm_eps,
                              route=route, validate=validate)


def _layer_inputs(w, cache):
    return (w.state_cache, w.token_to_req, w.positions, w.boundary_token_indices, w.block_table,
            w.kv_slot_mapping, cache)


def test_schema_mutates_only_out_and_returns_nothing():
    schema = OP.default._schema
    assert schema.returns == []
    mutated = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    assert mutated == ["out"]
    names = [a.name for a in schema.arguments]
    assert names[-7:] == ["block_size", "compress_ratio", "rms_norm_eps", "route", "validate", "kv_format", "overlap"]
    defaults = {a.name: a.default_value for a in schema.arguments if a.has_default_value()}
    assert defaults == {"kv_format": "int8", "overlap": False}  # callers of the earlier schema keep working


@pytest.mark.parametrize("route", ["reference", *TRITON_ROUTES])
def test_opcheck(route):
    w = _tiny()
    out = w.kv_cache.clone()
    # schema (does it write only what it declares?), fake tensor, autograd registration and
    # AOT dispatch with dynamic shapes.
    torch.library.opcheck(OP.default, _op_args(w, out, route))


@pytest.mark.parametrize("route", ["reference", *TRITON_ROUTES])
@pytest.mark.parametrize("validate", [True, False])
def test_op_writes_what_the_function_writes(route, validate):
    w = _tiny(seed=7)
    before = w.kv_cache.clone()
    via_op = before.clone()
    OP(*_op_args(w, via_op, route, validate))
    via_function = c128_256_512_compress(*w.args(), out=before.clone(), route=route, validate=validate)
    assert torch.equal(via_op, via_function)
    report = check_cache(w.checked_args(), via_op, before)
    assert report.ok, str(report)


def test_op_bad_input_raises_and_writes_nothing():
    w = _tiny(seed=9)
    out = w.kv_cache.clone()
    with pytest.raises(ValueError, match="compress_ratio"):
        OP(*_op_args(w, out, "reference")[:10], 100, *_op_args(w, out, "reference")[11:])
    slots = w.kv_slot_mapping.clone()
    slots[w.boundary_token_indices[0]] = out.shape[0] * 64  # one past the last slot
    w.kv_slot_mapping = slots
    with pytest.raises(ValueError, match="slot"):
        OP(*_op_args(w, out, "reference"))
    assert torch.equal(out, w.kv_cache)


def test_fake_kernel_checks_metadata():
    from torch._subclasses.fake_tensor import FakeTensorMode

    w = _tiny(device="cpu")
    with FakeTensorMode() as mode:
        args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in _op_args(w, w.kv_cache, "auto")]
        OP(*args)  # good metadata: nothing to check, nothing returned
        args[5] = mode.from_tensor(torch.zeros(256, dtype=torch.bfloat16))  # rms_norm_weight too narrow
        with pytest.raises(ValueError, match="rms_norm_weight"):
            OP(*args)


def test_op_with_validate_false_skips_a_bad_output_and_writes_the_rest():
    """validate=False reaches the function: a slot past the cache is skipped, not refused."""
    w = _tiny(seed=11)
    slots = w.kv_slot_mapping.clone()
    slots[w.boundary_token_indices[0]] = w.kv_cache.shape[0] * 64  # one past the last slot
    w.kv_slot_mapping = slots
    before = w.kv_cache.clone()
    out = before.clone()
    OP(*_op_args(w, out, "reference", validate=False))
    report = check_cache(w.checked_args(), out, before)
    assert report.ok and report.num_outputs_written >= 1, str(report)
    with pytest.raises(ValueError, match="slot"):
        OP(*_op_args(w, before.clone(), "reference", validate=True))


def test_layer_forward_passes_its_rms_norm_eps():
    """A layer built with a non-default epsilon writes what the function writes with it."""
    w = _tiny(seed=13)
    w.rms_norm_eps = 0.5  # large enough to change the normalised values' bytes
    before = w.kv_cache.clone()
    want = c128_256_512_compress(*w.args(), out=before.clone(), route="reference")
    out = before.clone()
    _layer(w, "reference")(*_layer_inputs(w, out))
    report = check_cache(w.checked_args(), out, before)  # the oracle, at the workload's epsilon
    assert report.ok, str(report)
    assert torch.equal(out, want)


# The Triton route runs where the other tests run it: interpreted on CPU, compiled on a GPU/NPU.
@pytest.mark.parametrize("route,device,padded", [("reference", "cpu", False), ("reference", "cpu", True),
                                                 ("ascend", DEVICE, False)])
def test_layer_compiles_in_one_graph_and_writes_the_cache_in_place(route, device, padded):
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    w = _tiny(device=device, seed=11)
    layer = _layer(w, route)
    eager_cache = w.kv_cache.clone()
    layer(*_layer_inputs(w, eager_cache))

    pages, width = w.kv_cache.shape
    # padded: the cache is a row slice of a wider engine buffer, whose extra bytes must survive.
    buffer = torch.randint(0, 256, (pages, width + (100 if padded else 0)), dtype=torch.uint8).to(device)
    buffer[:, :width] = w.kv_cache
    padding = buffer[:, width:].clone()
    cache = buffer[:, :width] if padded else buffer
    compiled = torch.compile(layer, fullgraph=True)  # fullgraph: a graph break is an error
    result, codes = run_and_get_code(compiled, *_layer_inputs(w, cache))
    assert result.data_ptr() == cache.data_ptr()
    assert torch.equal(cache, eager_cache)
    assert torch.equal(buffer[:, width:], padding)
    call = _wrapper_call_body("\n".join(codes))
    assert call.count("torch.ops.ascend_kvc.compress_.default(") == 1, call
    # Written in place: no functionalised copy of the cache allocated, written and copied back.
    assert not re.search(r"empty_strided\w*\(|\.copy_\(|clone\(", call), call


def test_compiled_layer_follows_batch_size_changes():
    # The second size makes Dynamo recompile with dynamic shapes; the fake kernel's metadata
    # checks then run on symbolic sizes, and the third size reuses that graph.
    torch._dynamo.reset()
    cases = [general_case(128, 8, num_reqs=n, outputs_per_req=2, seed=n) for n in (1, 2, 3)]
    layer = _layer(cases[0], "reference")
    compiled = torch.compile(layer, fullgraph=True)
    for w in cases:
        layer.rms_norm_weight, layer.cos_sin_cache = w.rms_norm_weight, w.cos_sin_cache
        eager_cache, cache = w.kv_cache.clone(), w.kv_cache.clone()
        layer(*_layer_inputs(w, eager_cache))
        compiled(*_layer_inputs(w, cache))
        assert torch.equal(cache, eager_cache), w.name


def _wrapper_call_body(code: str) -> str:
    """The body of the generated wrapper's ``call(...)``: what runs on every call."""
    lines = code.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"\s*def call\((self, )?args\):", line)), None)
    assert start is not None, code
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return "\n".join(body)


@pytest.mark.cuda
def test_layer_cuda_graph_replay_is_byte_identical_to_eager():
    w = general_case(256, 8, num_reqs=4, outputs_per_req=16, seed=21, device="cuda")
    layer = _layer(w, "gpgpu")
    static_state = w.state_cache.clone()
    static_slots = w.kv_slot_mapping.clone()
    static_cache = w.kv_cache.clone()

    def inputs():
        return (static_state, w.token_to_req, w.positions, w.boundary_token_indices, w.block_table,
                static_slots, static_cache)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        layer(*inputs())  # compile the kernels outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer(*inputs())

    g = torch.Generator(device="cuda").manual_seed(5)
    for step in range(3):
        # New state values and slots each step, written into the captured tensors.
        static_state.copy_(torch.randn(static_state.shape, device="cuda", generator=g))
        boundary = w.boundary_token_indices
        perm = torch.randperm(static_cache.shape[0] * 64, device="cuda", generator=g)[: boundary.numel()]
        slots = w.kv_slot_mapping.clone()
        slots[boundary] = torch.where(slots[boundary] >= 0, perm, slots[boundary])  # skipped stay skipped
        static_slots.copy_(slots)
        start = torch.randint(0, 256, static_cache.shape, dtype=torch.uint8, device="cuda", generator=g)
        static_cache.copy_(start)
        graph.replay()
        eager_cache = start.clone()
        layer(static_state, w.token_to_req, w.positions, w.boundary_token_indices, w.block_table,
              static_slots, eager_cache)
        torch.cuda.synchronize()
        assert torch.equal(static_cache, eager_cache), f"replay {step} differs from eager"
        assert not torch.equal(static_cache, start), f"replay {step} wrote nothing"


@pytest.mark.cuda
@pytest.mark.parametrize("route", ["gpgpu", "ascend"])
def test_layer_torch_compile_on_cuda_matches_eager(route):
    torch._dynamo.reset()
    w = general_case(512, 8, num_reqs=2, outputs_per_req=8, seed=23, device="cuda")
    layer = _layer(w, route)
    eager_cache = w.kv_cache.clone()
    layer(*_layer_inputs(w, eager_cache))
    from torch._inductor.utils import run_and_get_code

    compiled = torch.compile(layer, fullgraph=True)
    cache = w.kv_cache.clone()
    _, codes = run_and_get_code(compiled, *_layer_inputs(w, cache))
    torch.cuda.synchronize()
    assert torch.equal(cache, eager_cache)
    call = _wrapper_call_body("\n".join(codes))
    assert call.count("torch.ops.ascend_kvc.compress_.default(") == 1, call
    assert not re.search(r"empty_strided\w*\(|\.copy_\(|clone\(", call), call
    cache = w.kv_cache.clone()
    compiled(*_layer_inputs(w, cache))  # the cached graph
    torch.cuda.synchronize()
    assert torch.equal(cache, eager_cache)
