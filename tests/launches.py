"""Count what a call runs: Triton kernel launches (with their constexprs) and framework ops."""

from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Ops that move no data on the device: views, metadata and allocations without a fill.
_NOT_KERNELS = {
    "view", "_unsafe_view", "alias", "slice", "select", "as_strided", "expand", "unsqueeze", "squeeze",
    "t", "transpose", "permute", "detach", "empty", "empty_like", "empty_strided", "lift_fresh", "view_as_real",
    "view_as_complex", "unbind", "split", "split_with_sizes", "chunk", "narrow", "_reshape_alias", "reshape",
    "contiguous", "is_same_size", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
}


_INSIDE_TRITON = [0]  # > 0 while a Triton launch runs (the CPU interpreter copies tensors with aten ops)


class OpCounter(TorchDispatchMode):
    """Records every aten op that runs a device kernel (views and allocations are not counted),
    outside Triton launches."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.out_dtypes: list[tuple[str, torch.dtype | None]] = []  # (op, dtype of its first output)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        result = func(*args, **(kwargs or {}))
        if name not in _NOT_KERNELS and not _INSIDE_TRITON[0]:
            self.ops.append(name)
            first = result[0] if isinstance(result, (tuple, list)) and result else result
            self.out_dtypes.append((name, first.dtype if isinstance(first, torch.Tensor) else None))
        return result


@contextlib.contextmanager
def record_triton_launches():
    """Yield a list that fills with ``(kernel name, keyword args)`` per Triton launch."""
    import triton.runtime.interpreter as interp
    from triton.runtime.jit import JITFunction

    launches: list[tuple[str, dict]] = []
    saved = {}
    for cls in (interp.InterpretedFunction, JITFunction):
        saved[cls] = cls.run

        def run(self, *args, _orig=cls.run, grid=None, warmup=False, **kwargs):
            if not warmup:
                launches.append((self.fn.__name__, dict(kwargs)))
            _INSIDE_TRITON[0] += 1
            try:
                return _orig(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                _INSIDE_TRITON[0] -= 1

        cls.run = run
    try:
        yield launches
    finally:
        for cls, orig in saved.items():
            cls.run = orig
