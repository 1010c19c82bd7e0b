"""The speed shim of tests/triton_ascend/ (conftest.py explains it): triton-ascend's ``tl.max`` and
``tl.min`` reductions take the 3.2 interpreter's numpy path instead of its per-element loop."""

from __future__ import annotations

from interpreter_shim import toggled  # tests/, on the path (conftest.py)

_STATE = {"original": None}


def _fast_reductions() -> dict:
    import numpy as np
    from triton.triton_patch.language import standard as ta

    return {id(ta._elementwise_max_default): np.max, id(ta._elementwise_max_propagate_nan): np.max,
            id(ta._elementwise_min): np.min}


def installed() -> bool:
    return _STATE["original"] is not None


def install() -> None:
    from triton.runtime import interpreter

    if installed():
        return
    original = interpreter.ReduceOps.apply_impl
    fast = _fast_reductions()

    def apply_impl(self, input):
        op = fast.get(id(self.combine_fn))
        if op is None:
            return original(self, input)
        return self.min_max(input[0], val_reduce_op=op, idx_reduce_op=None)

    interpreter.ReduceOps.apply_impl = apply_impl
    _STATE["original"] = original


def remove() -> None:
    from triton.runtime import interpreter

    if installed():
        interpreter.ReduceOps.apply_impl = _STATE["original"]
        _STATE["original"] = None


def removed():
    """The interpreter's own reductions inside the block; the shim as it was after it."""
    return toggled(False, installed, install, remove)


def active():
    """The shim inside the block; as it was after it."""
    return toggled(True, installed, install, remove)
