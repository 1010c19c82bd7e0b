"""The launch-plan cache behind ``validate=False``: a hit must mean what a full call would do.

A plan is keyed by every tensor's type, dtype, shape, strides, device and 16-byte alignment and
by the scalars; these tests change one of those at a time after a plan exists and check that the
call still gives the oracle's bytes (a new plan) or the very error a cold call gives.
"""

import pytest
import torch

from ascend_kvc import api, c128_256_512_compress

from cases import general_case, run_and_check

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
NAMES = ["state_cache", "token_to_req", "positions", "boundary_token_indices", "block_table",
         "rms_norm_weight", "cos_sin_cache", "kv_slot_mapping", "kv_cache", "block_size", "compress_ratio",
         "rms_norm_eps"]


# Routes that make launch plans: the fallback, the Ascend default and fused.
PLANNED_ROUTES = ["gpgpu", "ascend", "ascend:fused"]


@pytest.fixture
def w():
    return general_case(128, 8, seed=211, num_reqs=2, outputs_per_req=2, device=DEVICE)


@pytest.mark.parametrize("route", PLANNED_ROUTES)
def test_repeat_call_reuses_one_plan(w, route):
    api._PLANS.clear()
    run_and_check(w, route, validate=False)
    assert len(api._PLANS) == 1
    plan = next(iter(api._PLANS.values()))
    run_and_check(w, route, validate=False)
    run_and_check(w, route, validate=True)  # the checks run, then the same plan
    assert list(api._PLANS.values()) == [plan]


@pytest.mark.parametrize("shift", [1, 2], ids=["4-bytes", "8-bytes"])
@pytest.mark.parametrize("route", PLANNED_ROUTES)
def test_misaligned_state_gets_its_own_plan(w, route, shift):
    """Triton specialises pointers on 16-byte alignment: a state_cache 4 or 8 bytes off must not
    reuse a kernel compiled for an aligned one (on a GPU its vector loads would fault or misread).
    8 bytes off is 8-byte aligned yet not 16-byte aligned: a key that kept only ``p & 7`` would
    wrongly reuse the aligned plan."""
    api._PLANS.clear()
    run_and_check(w, route, validate=False)
    flat = torch.empty(w.state_cache.numel() + shift, dtype=w.state_cache.dtype, device=DEVICE)
    assert flat.data_ptr() % 16 == 0
    flat[shift:] = w.state_cache.reshape(-1)
    w.state_cache = flat[shift:].view(w.state_cache.shape)
    assert w.state_cache.data_ptr() % 16 == 4 * shift
    run_and_check(w, route, validate=False)
    assert len(api._PLANS) == 2


@pytest.mark.parametrize("route", PLANNED_ROUTES)
def test_same_signature_new_values(w, route):
    """Same shapes, other values (a resized request, other slots, new eps): the plan's scalars
    come from the signature only, the values are read on the device."""
    api._PLANS.clear()
    run_and_check(w, route, validate=False)
    w.block_table = w.block_table.flip(0).contiguous()
    w.kv_slot_mapping = w.kv_slot_mapping.roll(1)
    run_and_check(w, route, validate=False)
    w.rms_norm_eps = 0.5
    run_and_check(w, route, validate=False)
    assert len(api._PLANS) == 2  # eps is part of the signature


@pytest.mark.parametrize("name", ["positions", "boundary_token_indices"])
def test_strided_index_tensors_are_not_cached(w, name):
    """check_metadata copies a strided 1-D tensor; the plan must not run on the strided one later."""
    api._PLANS.clear()
    given = getattr(w, name)
    buf = torch.empty(2 * given.numel(), dtype=given.dtype, device=DEVICE)
    buf[::2] = given
    setattr(w, name, buf[::2])
    assert not getattr(w, name).is_contiguous()
    for _ in range(2):
        run_and_check(w, "gpgpu", validate=False)
    assert len(api._PLANS) == 0


@pytest.mark.parametrize("route", PLANNED_ROUTES)
def test_validate_true_checks_values_even_when_a_plan_exists(w, route):
    """A stored plan serves only ``validate=False``: with ``validate=True`` and the same signature,
    a bad index value raises the cold call's ValueError and nothing is written."""
    api._PLANS.clear()
    run_and_check(w, route, validate=False)
    assert len(api._PLANS) == 1
    token = int(w.boundary_token_indices[0])
    w.kv_slot_mapping[token] = w.checked_args().num_slots  # one slot past the cache, same signature
    out = w.kv_cache.clone()
    snapshot = out.clone()
    with pytest.raises(ValueError, match=r"^kv_slot_mapping: output 0 .*nothing was written"):
        c128_256_512_compress(*w.args(), out=out, route=route, validate=True, **w.format_kwargs())
    assert torch.equal(out, snapshot)
    assert len(api._PLANS) == 1


@pytest.mark.parametrize("change,exc,match", [
    (dict(state_cache=lambda w: w.state_cache.double()), TypeError, "state_cache must have dtype"),
    (dict(block_size=lambda w: 8.0), TypeError, "block_size must be an int"),
    (dict(block_size=lambda w: True), TypeError, "block_size must be an int"),
    (dict(compress_ratio=lambda w: 64), ValueError, "compress_ratio must be one of"),
    (dict(rms_norm_eps=lambda w: float("nan")), ValueError, "rms_norm_eps must be a finite float"),
    (dict(rms_norm_eps=lambda w: -1.0), ValueError, "rms_norm_eps must be a finite float"),
    (dict(positions=lambda w: w.positions[:-1]), ValueError, "positions must have num_tokens"),
    (dict(kv_cache=lambda w: w.kv_cache[:, :37000]), ValueError, "kv_cache must have size 37376"),
    (dict(rms_norm_weight=lambda w: w.rms_norm_weight.to("meta")), ValueError, "rms_norm_weight is on meta"),
    (dict(route=lambda w: "gpgpu:fast"), ValueError, "route must be one of"),
    (dict(route=lambda w: ["gpgpu"]), TypeError, "route must be a str"),
    (dict(validate=lambda w: 0), TypeError, "validate must be a bool"),  # falsy, yet not False
    (dict(rms_norm_eps=lambda w: 0.0), ValueError, "rms_norm_eps must be a finite float >= 2"),
    (dict(kv_cache=lambda w: w.kv_cache[:1].expand(w.kv_cache.shape[0], -1)), ValueError,
     "out must not have overlapping"),
])
def test_bad_input_after_a_plan_raises_as_before(w, change, exc, match):
    api._PLANS.clear()
    run_and_check(w, "gpgpu", validate=False)
    kwargs = dict(zip(NAMES, w.args()), route="gpgpu", validate=False)
    for name, make in change.items():
        kwargs[name] = make(w)
    out = kwargs["kv_cache"] if "kv_cache" in change else w.kv_cache.clone()  # the serving form: out is the cache
    snapshot = out.clone()
    with pytest.raises(exc, match=match):
        c128_256_512_compress(**kwargs, out=out)
    assert torch.equal(out, snapshot)


def test_out_none_and_out_given_are_two_plans(w):
    api._PLANS.clear()
    run_and_check(w, "gpgpu", validate=False, inplace=False)
    run_and_check(w, "gpgpu", validate=False, inplace=True)
    run_and_check(w, "gpgpu", validate=False, inplace=False)
    assert len(api._PLANS) == 2


# The form in which each Triton's CUDA launcher hands its arguments to its C launch function, for
# the Tritons this library is run on (the GPU image's and the registry's).
KNOWN_C_LAUNCH_FORMS = {(3, 6): "star", (3, 8): "tuple"}


def _triton_minor() -> tuple[int, int]:
    import triton

    return tuple(int(x) for x in triton.__version__.split(".")[:2])


def test_c_launch_form_of_this_triton():
    """Read from the installed Triton's source: a form not recognised would quietly keep the slower
    generic launch, so on the Tritons we run on, the form must be the one expected."""
    from triton.backends.nvidia.driver import CudaLauncher

    from ascend_kvc.launch import c_launch_form

    expected = KNOWN_C_LAUNCH_FORMS.get(_triton_minor())
    if expected is None:
        pytest.skip(f"Triton {'.'.join(map(str, _triton_minor()))}: no expected form recorded")
    assert c_launch_form(CudaLauncher) == expected


def test_an_unknown_launcher_keeps_the_generic_launch():
    from ascend_kvc.launch import c_launch_form

    class ReorderedLauncher:
        def __call__(self, gridX, gridY, gridZ, stream, function, *args):
            self.launch(gridX, gridY, gridZ, stream, function, self.launch_pdl, self.launch_cooperative_grid,
                        global_scratch, profile_scratch, *args)  # noqa: F821

    class WrappedLauncher:
        def __call__(self, gridX, gridY, gridZ, stream, function, *args):
            args = args[::-1]
            self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                        global_scratch, profile_scratch, *args)  # noqa: F821
            self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                        global_scratch, profile_scratch, *args)  # noqa: F821

    assert c_launch_form(ReorderedLauncher) is None
    assert c_launch_form(WrappedLauncher) is None


@pytest.mark.skipif(DEVICE != "cuda", reason="compiled-kernel launches need a CUDA device")
@pytest.mark.parametrize("route", PLANNED_ROUTES)
def test_repeat_calls_go_through_the_c_launch_function(w, route):
    """On the Tritons we run on, every kernel of a plan launches through its C function once
    compiled, and the bytes stay the oracle's call after call."""
    if _triton_minor() not in KNOWN_C_LAUNCH_FORMS:
        pytest.skip("no expected launcher form for this Triton")
    api._PLANS.clear()
    run_and_check(w, route, validate=False)
    plan = next(iter(api._PLANS.values()))
    launchers = [launcher for launcher, _, _ in plan.launches] if hasattr(plan, "launches") else [plan.launcher]
    assert launchers and all(launcher.calls_c_launch for launcher in launchers)
    for _ in range(2):
        w.kv_slot_mapping = w.kv_slot_mapping.roll(1)
        run_and_check(w, route, validate=False)
    assert list(api._PLANS.values()) == [plan]


def test_a_wrapped_triton_run_does_not_turn_direct_launches_off_for_good():
    """While something wraps ``JITFunction.run`` (a launch counter such as tests/launches.py, or a
    profiler), the probe cannot read Triton's source and says no; once the wrapper is gone it reads
    it again. A process whose first launcher was made under a wrapper used to keep the slow path
    for good (on an H100, a test that reads the compiled kernel found none)."""
    from ascend_kvc import launch
    from launches import record_triton_launches

    launch._DIRECT_LAUNCH.clear()
    try:
        with record_triton_launches():
            assert launch._direct_launch_supported() is False
        if _triton_minor() in KNOWN_C_LAUNCH_FORMS:
            assert launch._direct_launch_supported() is True
    finally:
        launch._DIRECT_LAUNCH.clear()


def test_a_launcher_made_under_a_wrapped_run_asks_again_at_its_next_launch():
    """A launcher made while something wrapped ``JITFunction.run`` (a launch counter, a profiler
    during an engine's warm-up) has no constexpr tail, so no direct path; at its next launch
    with ``run`` unwrapped it asks the probe again and finds the tail, instead of re-binding its
    arguments through ``kernel[grid]`` for its plan's whole life. A stand-in kernel: the
    interpreter's kernels have no parameter list."""
    from types import SimpleNamespace

    from ascend_kvc import launch
    from launches import record_triton_launches

    class StandInKernel:
        params = [SimpleNamespace(name="x", is_constexpr=False), SimpleNamespace(name="N", is_constexpr=True)]

        def __getitem__(self, grid):
            return lambda *args, **kwargs: None  # no compiled kernel: the launcher stays slow

    launch._DIRECT_LAUNCH.clear()
    try:
        with record_triton_launches():
            launcher = launch.KernelLauncher(StandInKernel(), (1,), {"N": 4}, {})
            assert launcher._tail is None
            launcher(0, 1)
            assert launcher._tail is None  # still wrapped: not now
        launcher(0, 1)
        if _triton_minor() in KNOWN_C_LAUNCH_FORMS:
            assert launcher._tail == (4,)
    finally:
        launch._DIRECT_LAUNCH.clear()


@pytest.mark.skipif(DEVICE != "cuda", reason="compiled-kernel launches need a CUDA device")
@pytest.mark.parametrize("route", PLANNED_ROUTES)
def test_a_plan_made_under_a_wrapped_run_launches_directly_once_it_is_unwrapped(w, route):
    """The same for a real plan: made and first run under the tests' launch counter, every one of
    its launchers goes direct from its first call after the counter is gone."""
    from ascend_kvc import launch
    from launches import record_triton_launches

    launch._DIRECT_LAUNCH.clear()
    api._PLANS.clear()
    try:
        with record_triton_launches():
            run_and_check(w, route, validate=False)
        plan = next(iter(api._PLANS.values()))
        launchers = [launcher for launcher, _, _ in plan.launches] if hasattr(plan, "launches") else [plan.launcher]
        assert launchers and not any(launcher.direct for launcher in launchers)
        w.kv_slot_mapping = w.kv_slot_mapping.roll(1)
        run_and_check(w, route, validate=False)
        assert list(api._PLANS.values()) == [plan]
        if _triton_minor() in KNOWN_C_LAUNCH_FORMS:
            assert all(launcher.direct for launcher in launchers)
    finally:
        launch._DIRECT_LAUNCH.clear()
        api._PLANS.clear()
