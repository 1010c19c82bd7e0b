"""bench.steps --routes gpgpu --no-official with every step's window pieces forced to SPLITS
(env; unset: as planned): do a decode step's searched programs gain from fewer pieces to merge?"""
import os, sys
from bench import steps as S
from gpgpu_fallback import route as R

if os.environ.get("SPLITS"):
    n = int(os.environ["SPLITS"])
    R._step_splits = lambda *a: n
sys.exit(S.main(sys.argv[1:]))
