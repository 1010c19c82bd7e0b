"""gpgpu_fallback: the NVIDIA-like route (``route="gpgpu"``).

A split, block-centric online-softmax gather that writes per-split partial softmax states, then
one fused Triton finalizer that merges them, normalises, quantises, rotates and writes the bytes
straight into the pages. Tile choices per device kind live in ``tuning.py``.

It computes the whole contract (docs/CONTRACT.md): every ``kv_format`` (the int8 and fp8_e4m3
584-byte slots in pages of any number of slots, bf16 rows), ``compress_ratio`` 4 and the
overlapping ratio-4 compressor, each a compile-time specialisation (``KV_FORMAT``,
``SLOTS_PER_PAGE``, ``OVERLAP``), so the challenge's int8 kernel is the one it always was.
"""
