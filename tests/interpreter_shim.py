"""Speed shim for community Triton 3.8's CPU interpreter: patch ``triton.language`` once per launch.

Under ``TRITON_INTERPRET=1`` a launch (``GridExecutor.__call__``) swaps the builtins of
``triton.language`` (``tl``) for interpreted versions, runs every program, and puts them back.
Every call of a ``@triton.jit`` helper inside the kernel (``tl.sum``, ``tl.max``, ``tl.zeros``,
this library's helpers) goes through ``InterpretedFunction.__call__``, which patches the helper's
``tl`` / ``tl.core`` modules again: ``inspect.getmembers`` over five namespaces to find builtins
that are already replaced (so it replaces nothing), then re-sets a dozen attributes to new,
equal wrappers. That is thousands of no-op patches per launch, about half the time of the
BLOCK_D=64 rungs under the interpreter.

The shim skips a helper's patch when every module it would patch has already been patched within
the launch that is running (by the launch itself or by an earlier helper call, whose patches
Triton never undoes). The first patch of each module in a launch, and every patch outside a
launch, still runs Triton's own code, and a launch still restores what it patched when it ends.

The shim also turns off the interpreter's int32 overflow sanitizer while its ``debug`` option is
off. With the sanitizer on, every int32 ``+``, ``-`` and ``*`` in a kernel is done again in int64
and compared with the int32 bounds, only to hand the verdict to ``device_assert``, which returns
without reading it unless ``debug`` is on: a quarter of the time of the routes' tests under the
interpreter, for a value nothing reads.

And it remembers the numpy dtype of each Triton scalar type: the interpreter's
``_get_np_dtype`` builds its table of 19 types (hashing each) on every call, hundreds of
thousands of calls a test module.

No value changes: ``tests/test_interpreter_shim.py`` runs a kernel with helpers and whole operator
calls with and without the shim and compares the bytes.

Installed by tests/conftest.py for community Triton 3.8's interpreter only (not triton-ascend,
whose interpreter is built differently); ``ASCEND_KVC_INTERPRETER_SHIM=0`` leaves it out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect

DISABLE_ENV = "ASCEND_KVC_INTERPRETER_SHIM"

# Triton's own "original" _patch_lang, "grid_call" GridExecutor.__call__, "options" (the interpreter
# builder's) and "np_dtype" (_get_np_dtype), put back by uninstall()
_STATE: dict = {}
_LAUNCHES: list = []  # per running launch: frozenset of the modules patched so far (None: not yet)
_MODULES: dict = {}  # function -> lang_modules(function)
STATS = {"patched": 0, "skipped": 0}  # helper patches run / skipped, for the shim's own test


def supported() -> bool:
    """Community Triton 3.8's interpreter, whose launch patches through a restorable scope."""
    try:
        import triton
        from triton.runtime import interpreter
    except ImportError:
        return False
    return (triton.__version__.startswith("3.8.")
            and all(hasattr(interpreter, n) for n in ("_patch_lang", "_LangPatchScope", "GridExecutor",
                                                         "InterpretedFunction", "interpreter_builder",
                                                         "_get_np_dtype")))


def lang_modules(fn) -> frozenset:
    """The modules an interpreter's _patch_lang patches for ``fn``: tl and/or tl.core, as ``fn``
    sees them (found once a function: scanning its module's globals at every helper call cost 5%
    of a run). Also used by tests/triton_ascend/conftest.py for triton-ascend's interpreter."""
    import triton.language as tl

    modules = _MODULES.get(fn)
    if modules is None:
        modules = _MODULES[fn] = frozenset(
            id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core))
    return modules


def _patch_lang(fn):
    from triton.runtime import interpreter

    original = _STATE["original"]
    if not _LAUNCHES:  # outside a launch: Triton's own patch
        return original(fn)
    done = _LAUNCHES[-1]
    if done is None:  # the launch's own patch, restored when the launch ends
        scope = original(fn)
        _LAUNCHES[-1] = lang_modules(fn)
        return scope
    modules = lang_modules(fn)
    if modules <= done:  # a helper whose modules this launch already patched: nothing left to do
        STATS["skipped"] += 1
        return interpreter._LangPatchScope()
    STATS["patched"] += 1
    scope = original(fn)  # a module not patched yet in this launch (Triton leaves it patched)
    _LAUNCHES[-1] = done | modules
    return scope


def remembered_np_dtype(original):
    """A stand-in for an interpreter's ``_get_np_dtype`` (``original``) that asks it once a scalar
    type (a block type's answer is its element type's, as there; pointers, unhashable, are asked
    every time: its first test). Also used by tests/triton_ascend/conftest.py."""
    import triton.language as tl

    table = {}
    block_type, pointer_type = tl.block_type, tl.pointer_type

    def np_dtype(tt_dtype):
        scalar = tt_dtype.element_ty if isinstance(tt_dtype, block_type) else tt_dtype
        if isinstance(scalar, pointer_type):
            return original(scalar)
        found = table.get(scalar)
        if found is None:
            found = table[scalar] = original(scalar)
        return found

    np_dtype.original = original
    return np_dtype


def np_dtype_probe_types() -> list:
    """Every scalar type the interpreters store, as pointers and blocks too: what a stand-in for
    ``_get_np_dtype`` must answer as the interpreter does (the shims' tests, under either Triton)."""
    import triton.language as tl

    scalars = [tl.int1, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32, tl.uint32, tl.int64, tl.uint64,
               tl.float16, tl.bfloat16, tl.float32, tl.float64, tl.float8e5, tl.float8e4nv]
    return [*scalars, *(tl.pointer_type(t) for t in scalars), *(tl.block_type(t, [4, 8]) for t in scalars),
            tl.block_type(tl.pointer_type(tl.float32), [16])]


def _grid_call(self, *args, **kwargs):
    _LAUNCHES.append(None)
    try:
        return _STATE["grid_call"](self, *args, **kwargs)
    finally:
        _LAUNCHES.pop()


def install() -> bool:
    """Install the shim; False (and nothing changed) where the interpreter is not the one it is for."""
    if _STATE:
        return True
    if not supported():
        return False
    from triton.runtime import interpreter

    _STATE["original"] = interpreter._patch_lang
    _STATE["grid_call"] = interpreter.GridExecutor.__call__
    _STATE["options"] = options = interpreter.interpreter_builder.options
    _STATE["np_dtype"] = interpreter._get_np_dtype
    interpreter._patch_lang = _patch_lang
    interpreter.GridExecutor.__call__ = _grid_call
    interpreter._get_np_dtype = remembered_np_dtype(interpreter._get_np_dtype)
    if not options.debug:  # device_assert ignores the sanitizer's verdict (see above)
        interpreter.interpreter_builder.options = dataclasses.replace(options, sanitize_overflow=False)
    return True


def installed() -> bool:
    return bool(_STATE)


def uninstall() -> None:
    if not _STATE:
        return
    from triton.runtime import interpreter

    interpreter._patch_lang = _STATE.pop("original")
    interpreter.GridExecutor.__call__ = _STATE.pop("grid_call")
    interpreter.interpreter_builder.options = _STATE.pop("options")
    interpreter._get_np_dtype = _STATE.pop("np_dtype")


@contextlib.contextmanager
def toggled(on: bool, is_installed, put_in, take_out):
    """Within the block, a shim in (``on``) or out; after it, as it was. A shim is given by its
    three functions (is it installed, install it, remove it); this module's and triton-ascend's
    reduction shim (tests/triton_ascend/reduce_shim.py) share this."""
    was = is_installed()
    (put_in if on else take_out)()
    try:
        yield
    finally:
        if was != on:
            (put_in if was else take_out)()


def active():
    """Within the block, the shim installed (removed after, if it was not in)."""
    return toggled(True, installed, install, uninstall)


def removed():
    """Within the block, Triton's interpreter as shipped (the shim reinstalled after, if it was in)."""
    return toggled(False, installed, install, uninstall)
