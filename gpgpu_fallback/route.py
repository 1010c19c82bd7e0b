"""Route ``gpgpu``: the split gather, then the fused finalizer. No host sync with validate=False,
no data-dependent allocation: CUDA-graph capturable."""

from __future__ import annotations

import torch
import triton

from ascend_kvc.device import compute_units, device_kind
from ascend_kvc.layout import HEAD_DIM, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE

from .finalize import _fused_finalize_scatter_kernel
from .split_gather import _block8_split_softmax_kernel
from .tuning import tiles_for, window_splits


def run(args, route_name: str, plan, out: torch.Tensor) -> None:
    dev = args.device
    n, C, bs = args.num_outputs, args.compress_ratio, args.block_size
    tiles = tiles_for(device_kind(dev))
    max_cols = (C - 1) // bs + 2  # logical blocks a window can touch
    units = compute_units(dev.type, dev.index if dev.index is not None else 0)
    splits = window_splits(tiles, n, max_cols, units)
    nb = tiles.blocks_per_step
    cols_per_split = triton.cdiv(triton.cdiv(max_cols, splits), nb) * nb

    # One allocation: per piece max, sum and weighted sum [3, n, splits, 512], then the bad-block counts.
    work = torch.empty(3 * n * splits * HEAD_DIM + n * splits, dtype=torch.float32, device=dev)
    part_m, part_l, part_acc = work[: 3 * n * splits * HEAD_DIM].view(3, n, splits, HEAD_DIM).unbind(0)
    part_bad = work[3 * n * splits * HEAD_DIM :].view(torch.int32)
    st, bt = args.state_cache, args.block_table
    index_args = (args.boundary_token_indices, args.token_to_req, args.positions, args.kv_slot_mapping)
    num_slots = out.shape[0] * SLOTS_PER_PAGE
    _block8_split_softmax_kernel[(n * splits * (HEAD_DIM // tiles.block_d),)](
        st, *index_args, bt, part_m, part_l, part_acc, part_bad,
        args.token_to_req.shape[0], bt.shape[0], bt.shape[1], st.shape[0], num_slots,
        args.cos_sin_cache.shape[0], bs, cols_per_split,
        st.stride(0), st.stride(1), st.stride(2), bt.stride(0), bt.stride(1),
        C=C, BLOCK_D=tiles.block_d, BLOCK_BS=triton.next_power_of_2(bs), NB=nb, SPLITS=splits,
        num_warps=tiles.gather_warps, num_stages=tiles.gather_stages,
    )
    cs = args.cos_sin_cache
    _fused_finalize_scatter_kernel[(n,)](
        part_m, part_l, part_acc, part_bad, *index_args, args.rms_norm_weight, cs, out,
        args.token_to_req.shape[0], bt.shape[0], bt.shape[1], num_slots, cs.shape[0], bs,
        cs.stride(0), cs.stride(1), out.stride(0), args.rms_norm_eps,
        C=C, SPLITS=splits, SPLITS_P2=max(2, triton.next_power_of_2(splits)),
        NOPE_DIM=NOPE_DIM, PAYLOAD_BYTES=PAYLOAD_BYTES, SCALE_REGION=SCALE_REGION, SCALE_BYTES=SCALE_BYTES,
        SLOTS_PER_PAGE=SLOTS_PER_PAGE, num_warps=tiles.finalize_warps,
    )
