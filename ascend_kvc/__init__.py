"""ascend_kvc: byte-exact Triton kernels for DeepSeek-V4 KV-cache compression.

``c128_256_512_compress`` pools a window of compressor-state rows per boundary token, RMSNorms,
quantises and rotates the result and writes 584 bytes into a paged KV cache. Importing this
package defines no kernel and touches no device; routes load on first use.
"""

from .api import c128_256_512_compress
from .routes import ASCEND_STAGES, ROUTES, RouteUnavailableError, route_names

__all__ = ["c128_256_512_compress", "ASCEND_STAGES", "ROUTES", "RouteUnavailableError", "route_names"]
__version__ = "0.1.0"
