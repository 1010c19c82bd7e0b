"""Route ``gpgpu``: one launch of ``_window_compress_kernel`` per call. No host sync with
validate=False, no data-dependent allocation: CUDA-graph capturable.

GPUs only: ``ascend_kvc.routes`` refuses NPU tensors for this route (``RouteUnavailableError``,
with the reason). Its grid, ``n * splits * 512 / block_d`` programs, can pass triton-ascend's limit
of 65535, and the plan switches only CUDA devices; the Ascend ladder is the NPU route.

``CompressPlan`` does every host-side computation of a call once per argument signature (tiles,
window pieces, grid, scalar arguments, the compiled kernel); ``ascend_kvc.api`` caches plans so
that a repeat call only reads the current stream, finds its scratch and launches.
"""

from __future__ import annotations

import torch
import triton

from ascend_kvc.device import compute_units, device_kind
from ascend_kvc.launch import KernelLauncher, stream_scratch, stream_state
from ascend_kvc.layout import HEAD_DIM, SLOTS_PER_PAGE
from ascend_kvc.slot_bytes import SLOT_LAYOUT_CONSTEXPRS

from .compress import _window_compress_kernel
from .tuning import tiles_for, window_splits, window_steps


class CompressPlan:
    """The launch of one argument signature (shapes, dtypes, strides, device, scalars)."""

    def __init__(self, args, out: torch.Tensor | None):
        dev = args.device
        n, C, bs = args.num_outputs, args.compress_ratio, args.block_size
        self.device = dev
        self.cuda_index = dev.index if dev.type == "cuda" else None
        self.nothing_to_do = n == 0 or args.nothing_to_read
        if self.nothing_to_do:
            return
        tiles = tiles_for(device_kind(dev), C, n)
        steps = window_steps(tiles, bs)
        max_cols = (C - 1) // bs + 2  # logical blocks a window can touch
        units = compute_units(dev.type, dev.index if dev.index is not None else 0)
        splits = window_splits(tiles, n, max_cols, steps.blocks, units)
        cols_per_split = triton.cdiv(triton.cdiv(max_cols, splits), steps.blocks) * steps.blocks
        self.splits = splits
        self.scratch_floats = n * splits * (3 * HEAD_DIM + 1)
        self.num_outputs = n
        st, bt, cs = args.state_cache, args.block_table, args.cos_sin_cache
        self.scalars = (
            n, args.token_to_req.shape[0], bt.shape[0], bt.shape[1], st.shape[0], args.kv_cache.shape[0] * SLOTS_PER_PAGE,
            cs.shape[0], bs, cols_per_split,
            st.stride(0), st.stride(1), st.stride(2), bt.stride(0), bt.stride(1), cs.stride(0), cs.stride(1),
            args.kv_cache.shape[1] if out is None else out.stride(0),  # out=None: a new contiguous tensor
            args.rms_norm_eps,
        )
        constexprs = dict(C=C, BLOCK_D=tiles.block_d, ROWS=steps.rows, NB=steps.blocks, CHUNKED=steps.chunked,
                          SPLITS=splits, SPLITS_P2=max(2, triton.next_power_of_2(splits)),
                          EVICT="evict_first" if tiles.evict_first else "", **SLOT_LAYOUT_CONSTEXPRS)
        grid = (n * splits * (HEAD_DIM // tiles.block_d),)
        self.launcher = KernelLauncher(_window_compress_kernel, grid, constexprs,
                                       dict(num_warps=tiles.warps, num_stages=tiles.stages))

    def __call__(self, state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
                 cos_sin_cache, kv_slot_mapping, kv_cache, out, pointers: list | None = None):
        """Run on tensors of this plan's signature (1-D ones contiguous); returns the written cache.

        ``pointers``: the tensors' data addresses in argument order, as ``ascend_kvc.launch.
        call_signature`` gives them on a repeat call. Once the kernel is compiled the launch then
        takes those integers instead of the tensors.
        """
        if out is None:
            out = torch.zeros_like(kv_cache, memory_format=torch.contiguous_format)
        if self.nothing_to_do:
            return out
        index = self.cuda_index
        if index is not None and torch._C._cuda_getDevice() != index:
            with torch.cuda.device(index):
                return self(state_cache, token_to_req, positions, boundary_token_indices, block_table,
                            rms_norm_weight, cos_sin_cache, kv_slot_mapping, kv_cache, out, pointers)
        stream, key, capturing = stream_state(self.device)
        part, arrivals = stream_scratch(self.device, key, self.scratch_floats, self.num_outputs, capturing)
        if pointers is not None and self.launcher.takes_addresses():
            p = pointers  # in this method's argument order; the kernel's order below
            self.launcher.launch_compiled(stream, p[0], p[3], p[1], p[2], p[7], p[4], p[5], p[6], out.data_ptr(),
                                          part.data_ptr(), arrivals.data_ptr(), *self.scalars)
        else:
            self.launcher(stream, state_cache, boundary_token_indices, token_to_req, positions, kv_slot_mapping,
                          block_table, rms_norm_weight, cos_sin_cache, out, part, arrivals, *self.scalars)
        return out


def launch_plan(args, out: torch.Tensor | None, route_name: str = "gpgpu") -> CompressPlan:
    """A reusable plan for ``args``' signature; ``out`` as given to the operator."""
    return CompressPlan(args, out)


def run(args, route_name: str, plan, out: torch.Tensor) -> None:
    CompressPlan(args, out)(
        args.state_cache, args.token_to_req, args.positions, args.boundary_token_indices, args.block_table,
        args.rms_norm_weight, args.cos_sin_cache, args.kv_slot_mapping, args.kv_cache, out)
