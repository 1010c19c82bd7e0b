"""gpgpu_fallback: the NVIDIA-like route (``route="gpgpu"``).

A split, block-centric online-softmax gather that writes per-split partial softmax states, then
one fused Triton finalizer that merges them, normalises, quantises, rotates and writes the bytes
straight into the pages. Tile choices per device kind live in ``tuning.py``.
"""
