"""Why the default's unsplit gather (BF16_OUT) is slower than fused's at 40 programs: variants."""
import os, json, sys
os.environ.setdefault("ASCEND_KVC_VECTOR_CORES", "40")
import torch, triton, triton.language as tl
from triton.testing import do_bench
from ascend_kvc import api
from ascend_kvc.stages.plan import AscendPlan, _In, _Scratch, _OUT
from ascend_kvc.stages.block_gather import pool_window, store_rotated_bf16, _block_gather_softmax_kernel
from ascend_kvc.stages.fused import _fused_compress_kernel
from ascend_kvc.triton_helpers import resolve_output
from ascend_kvc.workloads import make_workload
DEV = os.environ.get("DEV", "cuda")
CASES = ((8, 131072, 256), (8, 65536, 128), (8, 131072, 128)) if DEV == "cuda" else ((1, 1024, 256),)
if DEV != "cuda":
    do_bench = lambda f, warmup, rep: (f(), 0.0)[1]


@triton.jit
def _v3(state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
        pooled_ptr, slot_out_ptr, rope_pos_out_ptr,
        num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
        state_s0, state_s1, state_s2, bt_s0, bt_s1, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1,
        C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
        GUARD: tl.constexpr, EPILOGUE: tl.constexpr):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    dims = tl.arange(0, 512)
    for i in range(pid, num_outputs, num_programs):
        ok, req, pos, slot = resolve_output(
            i, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,
            num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
        m = tl.full([512], float("-inf"), tl.float32)
        l = tl.zeros([512], tl.float32)
        acc = tl.zeros([512], tl.float32)
        n_bad = tl.where(ok, 0, 1)
        if ok:
            m, l, acc, n_bad = pool_window(state_ptr, block_table_ptr + req * bt_s0, bt_s1, num_blocks, pos - C + 1,
                                           pos, block_size, dims, state_s0, state_s1, state_s2, m, l, acc, n_bad,
                                           ROW_TILE, True, ROWS_PADDED, LOOKUP_AHEAD)
        if EPILOGUE:
            if GUARD:
                if n_bad == 0:
                    store_rotated_bf16(acc / l, weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1, ok,
                                       pooled_ptr + tl.cast(i, tl.int64) * 512)
            else:
                c = acc / tl.where(l > 0, l, 1.0)
                store_rotated_bf16(c, weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1, ok,
                                   pooled_ptr + tl.cast(i, tl.int64) * 512)
        else:
            tl.store(pooled_ptr + tl.cast(i, tl.int64) * 512 + dims, (acc / l).to(tl.int16))
        tl.store(slot_out_ptr + i, tl.where(n_bad == 0, slot, -1))
        tl.store(rope_pos_out_ptr + i, (pos // C) * C)


def materialise(plan, k, tensors, out):
    launcher, arguments, _ = plan.launches[k]
    scratch = torch.zeros(-(-plan.scratch_bytes // 4), dtype=torch.float32, device=DEV)
    return launcher, [tensors[a.index] if isinstance(a, _In) else out if a is _OUT
                      else plan._view(scratch, a) if isinstance(a, _Scratch) else a for a in arguments]


for case in CASES:
    w = make_workload(*case, device=DEV)
    a = w.args()
    out = w.kv_cache.clone()
    ca = w.checked_args(out)
    tensors = (ca.state_cache, ca.token_to_req, ca.positions, ca.boundary_token_indices, ca.block_table,
               ca.rms_norm_weight, ca.cos_sin_cache, ca.kv_slot_mapping, ca.kv_cache)
    pd = AscendPlan(ca, out, "triton-quant")
    pf = AscendPlan(ca, out, "fused")
    assert not pd.split.split, pd.split
    L, args = materialise(pd, 0, tensors, out)
    LF, argsF = materialise(pf, 0, tensors, out)
    grid = L.grid
    ce = L.constexprs
    res = {"case": w.name, "grid": grid}
    f1 = lambda: _block_gather_softmax_kernel[grid](*args, **ce)
    f1(); (torch.cuda.synchronize() if DEV == "cuda" else None)
    y_ref = args[6].clone(); s_ref = args[7].clone(); r_ref = args[8].clone()
    res["v1_default"] = do_bench(f1, warmup=5, rep=60) * 1e3
    res["fused"] = do_bench(lambda: _fused_compress_kernel[LF.grid](*argsF, **LF.constexprs), warmup=5, rep=60) * 1e3
    base = dict(C=ce["C"], ROW_TILE=ce["ROW_TILE"], ROWS_PADDED=ce["ROWS_PADDED"], LOOKUP_AHEAD=ce["LOOKUP_AHEAD"])
    for name, extra in (("v3_guard", dict(GUARD=True, EPILOGUE=True)), ("v3_noguard", dict(GUARD=False, EPILOGUE=True)),
                        ("v3_noepilogue", dict(GUARD=True, EPILOGUE=False))):
        args[6].zero_(); args[7].zero_(); args[8].zero_()
        f = lambda: _v3[grid](*args, **base, **extra)
        f(); (torch.cuda.synchronize() if DEV == "cuda" else None)
        if extra["EPILOGUE"]:
            res[name + "_same"] = bool(torch.equal(args[6], y_ref) and torch.equal(args[7], s_ref) and torch.equal(args[8], r_ref))
        res[name] = do_bench(f, warmup=5, rep=60) * 1e3
    print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in res.items()}), flush=True)
