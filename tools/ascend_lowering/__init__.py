"""Ascend lowering audit: every Ascend-route kernel through triton-ascend's real tool chain, on x86.

    python -m tools.ascend_lowering              # tables; exit 1 if any kernel fails to compile
    python -m tools.ascend_lowering --json out.json

For every kernel of the Ascend ladder x C in {128, 256, 512} x block_size x state dtype (one
compilation per distinct specialisation): triton-ascend's front end (Triton IR -> Linalg), then
``bishengir-compile`` from ascendnpu-ir for an Ascend910B3 up to CANN's ``hivmc`` code generator,
which is not available here. A kernel passes when the compiler reaches code generation; the
compiler's own unified-buffer plan decides what fits. The Linalg module is also read for the data
movement (scalarised loops, block-table loads, tile copies).

It cannot prove hivmc's code generation, runtime behaviour or speed on a 910B.
"""

from .analyse import Copy, analyse_linalg
from .driver import ascend_triton_path, bishengir_binary, build_dir, compile_specs, run_audit
from .report import format_data_movement, format_table, problems
from .toolchain import CODEGEN, TARGET_ARCH, UB_BITS_910B, UB_OVERFLOW

__all__ = [
    "CODEGEN", "Copy", "TARGET_ARCH", "UB_BITS_910B", "UB_OVERFLOW", "analyse_linalg", "ascend_triton_path",
    "bishengir_binary", "build_dir", "compile_specs", "format_data_movement", "format_table", "problems",
    "run_audit",
]
