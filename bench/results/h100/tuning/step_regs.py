"""The script behind step_regs_f3c68a1.log (from the repository root, PYTHONPATH=.): registers and
spills of gpgpu's step kernel (token tiles) on official cases, after one call each."""
import sys, torch
from ascend_kvc import compress_step
from ascend_kvc.workloads import official_step
from ascend_kvc import step as stepmod
for case in [(1, 8192, 128), (1, 8192, 256), (1, 8192, 512), (4, 32768, 512), (8, 65536, 512)]:
    sw, w = official_step(*case, shuffle=True, nonzero_cache=True, device="cuda")
    stepmod.clear_step_plans()
    compress_step(*sw.args(), block_size=sw.block_size, compress_ratio=sw.compress_ratio,
                  state_slot_mapping=sw.state_slot_mapping, route="gpgpu", validate=False)
    torch.cuda.synchronize()
    for plan in stepmod._STEP_PLANS.values():
        k = plan.launcher._compiled
        print(case, "grid", plan.launcher.grid, "regs", k.n_regs, "spills", k.n_spills, "splits", plan.splits,
              {n: plan.launcher.constexprs[n] for n in ("BLOCK_D", "ROWS", "NB", "TOKEN_TILE")},
              plan.launcher.options, flush=True)
