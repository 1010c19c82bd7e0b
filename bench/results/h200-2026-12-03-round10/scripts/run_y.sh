#!/bin/bash
# Call Y: split against unsplit for calls with at least as many outputs as cores.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
timeout 280 python3 .versus/sweep_split.py sweep > $OUT/sweep.log 2>&1
timeout 150 python3 .versus/sweep_split.py full > $OUT/full.log 2>&1
grep -v Warning $OUT/sweep.log $OUT/full.log | cut -c1-300
