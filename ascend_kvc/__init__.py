"""ascend_kvc: byte-exact Triton kernels for DeepSeek-V4 KV-cache compression.

``c128_256_512_compress`` pools a window of compressor-state rows per boundary token, RMSNorms,
quantises and rotates the result and writes 584 bytes into a paged KV cache.

What importing this package does, and nothing more:

- reads installed-package metadata to refuse a broken Triton install (community Triton and
  triton-ascend in one directory, ``triton_install.check_triton_install``), about half a millisecond;
- defines the custom ops ``torch.ops.ascend_kvc.compress_`` and ``compress_step_`` in PyTorch's
  dispatcher (``ops``): bookkeeping only.

``compress_step`` is the serving engine's once-per-step form: it finds the step's boundary tokens
itself, on the device, and is capturable in a graph (``step``).

It defines no Triton kernel, imports neither Triton nor torch-npu, touches no device and reads no
environment variable; routes load on first use.
"""

from .triton_install import TritonConflictError, check_triton_install

check_triton_install()

from .api import c128_256_512_compress  # noqa: E402
from .step import compress_step  # noqa: E402
from .routes import ASCEND_STAGES, ROUTES, RouteUnavailableError, route_names  # noqa: E402
from . import ops  # noqa: E402,F401  (registers torch.ops.ascend_kvc.compress_)

__all__ = [
    "c128_256_512_compress", "compress_step", "ASCEND_STAGES", "ROUTES", "RouteUnavailableError", "TritonConflictError",
    "route_names",
]
__version__ = "0.1.0"
