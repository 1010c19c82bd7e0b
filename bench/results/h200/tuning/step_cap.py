"""bench.steps on the official cases as steps, gpgpu only, with the token tiles' register cap as
planned (CAP=0) or at 128 wherever one wave's cap would be below 128 (CAP=1)."""
import os, sys
from bench import steps as S
from gpgpu_fallback import route as R

if os.environ.get("CAP") == "1":
    orig = R.one_wave_registers
    def capped(programs, warps, units):
        per_unit = -(-programs // units)
        below = R._SM_REGISTERS // (per_unit * warps * 32) // 8 * 8 < R.TOKEN_TILE_MIN_REGISTERS
        return R.TOKEN_TILE_MIN_REGISTERS if below else orig(programs, warps, units)
    R.one_wave_registers = capped
orig_w = S.workloads
S.workloads = lambda small, device, official=True: (w for w in orig_w(small, device, official) if w[0] == "official")
sys.exit(S.main(sys.argv[1:]))
