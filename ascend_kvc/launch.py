"""Cheap repeat launches: a direct launcher for one Triton kernel specialisation, per-stream
scratch, and the argument signature that a cached launch plan is keyed by.

``kernel[grid](...)`` re-binds every argument, recomputes Triton's specialisation key and looks
the compiled kernel up on every call (tens of microseconds). A ``KernelLauncher`` does that once:
its first call goes through ``kernel[grid]`` and keeps the ``CompiledKernel`` it returns; later
calls hand the arguments straight to that kernel's launcher, as ``JITFunction.run`` itself does
after its look-up. The caller guarantees that later calls have the same specialisation (same
dtypes, same integer arguments, same 16-byte alignment of every pointer): it keys its plans with
``call_signature``. Pointer arguments may then be plain integer addresses: Triton's CUDA launcher
takes an integer as the address itself, where for a tensor it calls ``data_ptr()`` and asks the
driver about the pointer (``cuPointerGetAttribute``) on every launch.

Below ``kernel.run`` sits one more Python layer, the CUDA launcher object's ``__call__``: it
defines two helpers, asks for global and profile scratch and then calls the C launch function.
When the kernel needs neither scratch (none of ours does) a launcher calls that C function
itself, in the argument order of the Triton it runs on. The order is read from the launcher's
source, for the two forms known (those of Triton 3.6 and 3.8; a Triton whose launcher has either
form verbatim takes it too); any other Triton keeps ``kernel.run``.
"""

from __future__ import annotations

import functools
import inspect

import torch


def call_signature(tensors: tuple, scalars: tuple) -> tuple[tuple, list]:
    """``(key, pointers)``: everything about the arguments that a checked, specialised launch plan
    depends on, and each tensor's data address (``None`` for a ``None`` argument).

    Per tensor: its Python type, dtype, shape, strides, device and whether its address is
    16-byte aligned (Triton specialises pointers on that); per scalar: its type and value.
    The addresses let a plan hand plain integers to the compiled kernel's launcher, which then
    neither calls ``data_ptr`` nor asks the driver about each pointer again.
    Raises ``AttributeError``/``TypeError`` on a non-tensor; the caller then takes the slow path.
    """
    key = []
    pointers = []
    for t in tensors:
        if t is None:
            key.append(None)
            pointers.append(None)
        else:
            p = t.data_ptr()
            pointers.append(p)
            key += (type(t), t.dtype, t.shape, t.stride(), t.device, p & 15)
    for s in scalars:
        key += (type(s), s)
    return tuple(key), pointers


_DIRECT_LAUNCH: list[bool] = []  # the answer, once read from Triton's own JITFunction.run


def _direct_launch_supported() -> bool:
    """Does this Triton launch a compiled kernel as ``kernel.run(grid..., stream, function,
    packed_metadata, launch_metadata, enter_hook, exit_hook, *all_args)``? Read from its source.

    While something has replaced ``JITFunction.run`` (a profiler's or a test's wrapper that counts
    launches), its source is not Triton's: the answer is no for now, and the question is asked
    again next time instead of keeping that no for the life of the process."""
    if _DIRECT_LAUNCH:
        return _DIRECT_LAUNCH[0]
    try:
        from triton import knobs  # noqa: F401  (Triton >= 3.4)
        from triton.runtime.jit import JITFunction

        run = JITFunction.run
    except (ImportError, AttributeError):  # an older Triton (triton-ascend 3.2): for good
        _DIRECT_LAUNCH.append(False)
        return False
    if getattr(run, "__module__", None) != JITFunction.__module__:
        return False  # wrapped: not Triton's own code, ask again later
    try:
        src = " ".join(inspect.getsource(run).split())
    except (OSError, TypeError):
        src = ""
    _DIRECT_LAUNCH.append("kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, "
                          "launch_metadata" in src and "*bound_args.values()" in src)
    return _DIRECT_LAUNCH[0]


# How a CUDA launcher's ``__call__`` hands its arguments to the C launch function, by Triton
# version (whitespace-normalised source). ``"star"``: kernel metadata, launch metadata, the two
# hooks and the kernel arguments follow the scratch pointers as positional arguments (Triton 3.6);
# ``"tuple"``: the hooks come before the scratch pointers and the kernel arguments go as one tuple
# after the argument annotations and kernel signature (Triton 3.8).
_C_LAUNCH_FORMS = {
    "star": ("def __call__(self, gridX, gridY, gridZ, stream, function, *args):",
             "self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl, "
             "global_scratch, profile_scratch, *args)"),
    "tuple": ("def __call__(self, gridX, gridY, gridZ, stream, function, kernel_metadata, launch_metadata, "
              "launch_enter_hook, launch_exit_hook, *args):",
              "self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl, "
              "kernel_metadata, launch_metadata, launch_enter_hook, launch_exit_hook, global_scratch, "
              "profile_scratch, self.arg_annotations, self.kernel_signature, kernel_args)"),
}


@functools.lru_cache(maxsize=None)
def c_launch_form(launcher_type: type) -> str | None:
    """``"star"`` or ``"tuple"`` (``_C_LAUNCH_FORMS``) when ``launcher_type.__call__`` passes its
    arguments to ``self.launch`` in that form and does nothing else with them that a kernel
    without scratch needs; ``None`` otherwise (then launches go through ``__call__``)."""
    try:
        src = " ".join(inspect.getsource(launcher_type.__call__).split())
    except (OSError, TypeError, AttributeError):
        return None
    for form, (head, call) in _C_LAUNCH_FORMS.items():
        if src.startswith(head) and src.count("self.launch(") == 1 and call in src:
            if form == "tuple" and "kernel_args = args" not in src:
                return None
            return form
    return None


def _c_launch(compiled, grid: tuple[int, int, int], tail: tuple):
    """``launch(stream, *args)`` that calls ``compiled``'s C launch function directly, or ``None``
    when the launcher is of an unknown form or the kernel needs scratch or instrumentation."""
    run = compiled.run
    form = c_launch_form(type(run))
    if form is None or getattr(run, "gsan_enabled", False) or not hasattr(run, "launch"):
        return None
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None
    c_launch, gx, gy, gz = run.launch, *grid
    function, packed = compiled.function, compiled.packed_metadata
    coop, pdl = run.launch_cooperative_grid, run.launch_pdl
    if form == "star":
        def launch(stream, *args):
            c_launch(gx, gy, gz, stream, function, coop, pdl, None, None, packed, None, None, None, *args, *tail)
    else:
        annotations, signature = run.arg_annotations, run.kernel_signature

        def launch(stream, *args):
            c_launch(gx, gy, gz, stream, function, coop, pdl, packed, None, None, None, None, None,
                     annotations, signature, (*args, *tail))
    return launch


def _hook_idle(hook) -> bool:
    return hook is None or not getattr(hook, "calls", True)  # Triton 3.8: an empty HookChain


@functools.lru_cache(maxsize=None)
def _runtime_knobs():
    from triton import knobs

    return knobs.runtime


class KernelLauncher:
    """Launch one specialisation of a ``@triton.jit`` kernel on a fixed grid.

    ``constexprs`` are the kernel's ``tl.constexpr`` arguments by name (they must follow every
    runtime argument in its signature); ``options`` are launch options (``num_warps``, ...).
    """

    def __init__(self, kernel, grid: tuple[int, ...], constexprs: dict, options: dict):
        self.kernel = kernel
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.constexprs = constexprs
        self.options = options
        # constexpr values in signature order, for the direct path; asked again at the next slow
        # launch while the probe's answer is only "not now" (``JITFunction.run`` was wrapped)
        self._tail, self._ask_again = self._constexpr_tail()
        self._compiled = None

    def _constexpr_tail(self) -> tuple[tuple | None, bool]:
        """``(tail, ask again)``: the constexpr values in the kernel's signature order, where this
        Triton launches directly and every constexpr follows the runtime arguments (else
        ``None``), and whether a ``None`` may change (the probe could not read Triton's own
        ``JITFunction.run``, which something wrapped)."""
        params = getattr(self.kernel, "params", None)
        if params is None:
            return None, False
        if not _direct_launch_supported():
            return None, not _DIRECT_LAUNCH
        names = [p.name for p in params if p.is_constexpr]
        runtime = [p for p in params if not p.is_constexpr]
        if set(names) == set(self.constexprs) and all(p is params[k] for k, p in enumerate(runtime)):
            return tuple(self.constexprs[n] for n in names), False
        return None, False

    @property
    def direct(self) -> bool:
        """Whether the next call skips ``kernel[grid]``."""
        return self._compiled is not None

    def takes_addresses(self) -> bool:
        """Whether the next call may pass integer addresses for pointer arguments: the kernel is
        compiled and no launch hook (a profiler's) wants to see the tensors."""
        if self._compiled is None:
            return False
        knobs = _runtime_knobs()
        return _hook_idle(knobs.launch_enter_hook) and _hook_idle(knobs.launch_exit_hook)

    def launch_compiled(self, stream: int, *args) -> None:
        """Launch the compiled kernel, no questions asked: only after ``takes_addresses()``.
        Replaced per instance by the C launch function's caller where ``_c_launch`` makes one."""
        self._run(*self.grid, stream, self._function, self._packed, None, None, None, *args, *self._tail)

    @property
    def calls_c_launch(self) -> bool:
        """Whether ``launch_compiled`` calls the C launch function directly."""
        return "launch_compiled" in self.__dict__

    def __call__(self, stream: int, *args) -> None:
        """Launch with the runtime arguments ``args`` on the raw CUDA stream ``stream``
        (Triton's own current stream is used on the first call and on non-direct paths)."""
        compiled = self._compiled
        if compiled is not None:
            knobs = _runtime_knobs()
            enter, leave = knobs.launch_enter_hook, knobs.launch_exit_hook
            if _hook_idle(enter) and _hook_idle(leave):
                self._run(*self.grid, stream, self._function, self._packed, None, None, None, *args, *self._tail)
                return
            full = (*args, *self._tail)
            meta = compiled.launch_metadata(self.grid, stream, *full)
            self._run(*self.grid, stream, self._function, self._packed, meta, enter, leave, *full)
            return
        result = self.kernel[self.grid](*args, **self.constexprs, **self.options)
        if self._ask_again:  # made under a wrapped ``run`` (a profiler's): direct once it is gone
            self._tail, self._ask_again = self._constexpr_tail()
        if self._tail is not None and all(hasattr(result, a) for a in ("run", "function", "packed_metadata")):
            self._run, self._function, self._packed = result.run, result.function, result.packed_metadata
            self._compiled = result
            fast = _c_launch(result, self.grid, self._tail)
            if fast is not None:
                self.launch_compiled = fast


def stream_state(device) -> tuple[int, object, bool]:
    """``(raw stream, stream key, capturing)`` for kernels queued now on ``device``.

    The raw CUDA stream is what a direct launch takes (0 off CUDA, where Triton's own launcher
    finds the stream); the key names the stream for ``stream_scratch``; ``capturing`` says whether
    that stream is being captured into a graph: a CUDA graph, or on an NPU torch-npu's NPU graph
    (aclgraph, which vLLM-Ascend captures decode steps into). On an NPU the key is the stream's
    device and id; its raw handle (``npu_stream``) is not needed and not read. A torch-npu
    without graph capture is never capturing.
    """
    if device.type == "cuda":
        raw = torch._C._cuda_getCurrentRawStream(device.index)
        return raw, raw, torch._C._cuda_isCurrentStreamCapturing()
    if device.type == "npu":
        npu = torch.npu
        stream = npu.current_stream(device)
        capturing = getattr(npu, "is_current_stream_capturing", None)
        key = ("npu", getattr(stream, "device_index", None), getattr(stream, "stream_id", None))
        return 0, key, bool(capturing()) if capturing is not None else False
    return 0, 0, False


# Scratch per (device, stream): kernels queued on one stream run one after another, so they can
# share it; kernels on two streams may overlap, so they never do.
_SCRATCH: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

# Counters for calls captured into a graph. Their kernels leave them zero for the next replay, but
# they must be zero before the first one, and a zeros() inside the capture would put a fill kernel
# into every replay (1.0-1.4 us of a replay on an H100; bench/RESULTS.md). So a captured call's
# counters are a slice of an arena zeroed outside any capture, by an earlier call that was not
# captured (an engine's warm-up call). Each slice goes to one captured call for good: never handed
# out again nor freed, since its graph may replay at any time. PyTorch synchronises the device
# before a capture begins, so the arena's zeroing has run by then.
GRAPH_COUNTER_ARENA = 1 << 18  # int32 counters an arena (1 MiB), or one call's if it needs more
_GRAPH_COUNTER_ALIGN = 32  # counters: slices start 128 bytes apart (Triton's pointer alignment holds)
_ARENAS: dict[torch.device, list] = {}  # device -> [zeroed arena, its first counter not handed out]
_SPENT_ARENAS: list[torch.Tensor] = []  # arenas replaced while graphs may hold slices of them
_ARENAS_DRAWN: set[torch.device] = set()  # devices a capture drew counters for since their last check


def _arena_with_room(device: torch.device, counters: int) -> list | None:
    """The device's arena if ``counters`` more fit in it."""
    arena = _ARENAS.get(device)
    return arena if arena is not None and arena[0].numel() - arena[1] >= counters else None


def _graph_counters(device: torch.device, counters: int) -> torch.Tensor:
    """``counters`` zeroed int32 counters for a call being captured: a slice of the device's
    arena when it has room, else a zeros() that the graph replays."""
    _ARENAS_DRAWN.add(device)
    arena = _arena_with_room(device, counters)
    if arena is not None:
        start = arena[1]
        arena[1] = min(arena[0].numel(), -(-(start + counters) // _GRAPH_COUNTER_ALIGN) * _GRAPH_COUNTER_ALIGN)
        return arena[0][start:start + counters]
    return torch.zeros(counters, dtype=torch.int32, device=device)


def _keep_graph_counters(device: torch.device, counters: int) -> None:
    """Outside a capture: make sure the device's arena has room for a capture of this call."""
    _ARENAS_DRAWN.discard(device)
    if _arena_with_room(device, counters) is not None:
        return
    if device in _ARENAS:
        _SPENT_ARENAS.append(_ARENAS[device][0])
    _ARENAS[device] = [torch.zeros(max(GRAPH_COUNTER_ARENA, counters), dtype=torch.int32, device=device), 0]


def stream_scratch(device: torch.device, stream, floats: int, counters: int,
                   capturing: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(float32 scratch >= floats, int32 counters >= counters)`` for kernels on ``stream`` (the
    key ``stream_state`` gives).

    The counters are zero when handed out, and a kernel that uses them must leave them zero.
    While a graph is being captured (``capturing``, from ``stream_state``) the scratch is fresh
    for the call: it then belongs to the graph, whose replays may run on any stream, and a later
    call that needs more scratch cannot free it under the graph. Its counters are then a slice of
    a zeroed arena that a call outside the capture made (``_graph_counters``), so that the graph
    replays no fill.
    """
    if capturing:
        return (torch.empty(floats, dtype=torch.float32, device=device),
                _graph_counters(device, counters) if counters else torch.empty(0, dtype=torch.int32, device=device))
    # The arena is checked where the stream's scratch is made or grown, and after a capture drew
    # from it: not on every call of the hot path.
    key = (device, stream)
    have = _SCRATCH.get(key)
    if have is not None and have[0].numel() >= floats and have[1].numel() >= counters:
        if counters and _ARENAS_DRAWN and device in _ARENAS_DRAWN:
            _keep_graph_counters(device, counters)
        return have
    if counters:
        _keep_graph_counters(device, counters)
    old_floats, old_counters = have if have is not None else (None, None)
    fresh_floats = old_floats if old_floats is not None and old_floats.numel() >= floats else (
        torch.empty(floats, dtype=torch.float32, device=device))
    fresh_counters = old_counters if old_counters is not None and old_counters.numel() >= counters else (
        torch.zeros(counters, dtype=torch.int32, device=device))
    _SCRATCH[key] = (fresh_floats, fresh_counters)
    return fresh_floats, fresh_counters
