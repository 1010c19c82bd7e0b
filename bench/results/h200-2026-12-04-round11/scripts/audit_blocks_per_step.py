import torch
from tools.ascend_lowering import matrix as mx, driver
from ascend_kvc import stages
specs, seen = [], set()
for bs in (1, 2, 3, 4, 8):
    for C in (128, 512):
        for dt in (torch.float32, torch.bfloat16):
            for st in ("fused", "triton-quant"):
                for split in (False, True):
                    for ks in stages.kernel_specializations(st, bs, C, dt, split=split):
                        if "BLOCKS_PER_STEP" not in ks.constexprs: continue
                        sp = mx.to_spec(ks)
                        if repr(sp) in seen: continue
                        seen.add(repr(sp)); specs.append(sp)
print(len(specs), "specs")
res = driver.compile_specs(specs)
bad = 0
for sp in specs:
    r = res[sp.key] if hasattr(sp, "key") else None
for key, r in res.items():
    a = r["analysis"]
    ok = r["compiler"] == "reached code generation" and a["discrete_accesses"] == 0 and a["scalar_loops_in_hot_loop"] == 0
    bad += not ok
    print(key, r["work_dir"].split("/")[-1][:28], r["compiler"], round(r["ub_bits"] / 8192, 1) if r.get("ub_bits") else None, "discrete", a["discrete_accesses"], "scalar_hot", a["scalar_loops_in_hot_loop"], "OK" if ok else "PROBLEM")
print("problems", bad)
