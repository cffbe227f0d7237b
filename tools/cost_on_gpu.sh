#!/usr/bin/env bash
# What training costs on a GPU (issue 44): the speed ladder and the scaling sweep (with its --check)
# in one go, their records and logs in one folder, the machine described beside them.
#
#   bash tools/cost_on_gpu.sh OUTDIR          # on a CUDA machine: about 4 to 5 minutes on an H100
#   TOY=1 bash tools/cost_on_gpu.sh OUTDIR    # a dry run on the CPU with toy budgets (a few minutes)
#
# OUTDIR then holds six files: machine.txt, speed_ladder_cuda.json, speed_ladder.log,
# scaling_sweep.json, scaling_sweep.log, scaling_sweep_check.log. The records ship in
# src/transformer_book/weights/. Each tool runs under its own time limit and a failure of one does
# not stop the next; the exit status is 1 if any failed. $PYTHON picks the interpreter (default: the
# first of .venv/bin/python, python3, python whose torch sees a GPU); the package is read from src/
# (no install needed).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:?usage: bash tools/cost_on_gpu.sh OUTDIR}"
mkdir -p "$out"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if [ -z "${PYTHON:-}" ]; then  # the first interpreter whose torch sees a GPU (TOY=1: any with torch)
  want='import torch; assert torch.cuda.is_available()'
  [ "${TOY:-0}" = 1 ] && want='import torch'
  for candidate in .venv/bin/python python3 python; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "$want" 2>/dev/null; then
      PYTHON=$candidate
      break
    fi
  done
  PYTHON="${PYTHON:-python3}"
fi
echo "== $PYTHON: $("$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available())' 2>&1)"

if [ "${TOY:-0}" = 1 ]; then
  device=cpu
  ladder=(--ladder cuda --steps 2 --warmup 1 --rungs tf32 bf16 sdpa fused_adamw compile)
  sweep=(--budgets 1e10 3e10 --held-out-budget 6e10 --sizes 32x1 64x1 96x1)
  limits=(600 600 120)
else
  device=cuda
  ladder=(--steps 60 --warmup 5)
  sweep=()
  limits=(150 360 40)  # seconds: the ladder (two compilations), the sweep (33,091 steps), the check
fi

{
  date -u
  nvidia-smi 2>/dev/null || echo "nvidia-smi: not here"
  "$PYTHON" -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
} >"$out/machine.txt" 2>&1

status=0
run() {  # run LIMIT LOG COMMAND...: the command's output to LOG and to the screen
  local limit=$1 log=$2
  shift 2
  echo "== $* (at most ${limit} s)"
  timeout "$limit" "$PYTHON" "$@" 2>&1 | tee "$out/$log"
  local code=${PIPESTATUS[0]}
  if [ "$code" != 0 ]; then
    echo "== exit status $code (124: stopped at its time limit)" | tee -a "$out/$log"
    status=1
  fi
}
started=$SECONDS
run "${limits[0]}" speed_ladder.log tools/speed_ladder.py --device "$device" "${ladder[@]}" --out "$out"
run "${limits[1]}" scaling_sweep.log tools/train_scaling_sweep.py --device "$device" "${sweep[@]}" --out "$out"
run "${limits[2]}" scaling_sweep_check.log tools/train_scaling_sweep.py --device "$device" --check --out "$out"
echo "== $((SECONDS - started)) s in all; in $out:"
ls -l "$out"
exit $status
