#!/usr/bin/env bash
# One prepared check for a lent GPU machine (no network needed once torch is installed):
#   bash bench/gpu_check.sh            # ~5 minutes on one H100/H200
# 1. a virtual environment (.venv, reusing a system torch if one is installed);
# 2. random-weight pairs at real vocabularies (Llama 3: 128,256; Qwen2.5: 151,936), built locally;
# 3. a few OnPD and OffPD steps on each: tokens/s, peak memory, time split (bench/gpu_steps.py),
#    with the teacher on a second GPU as well when there is one;
# 4. the gpu-marked tests (train, eval and a two-run study on CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PAIRS=${PAIRS:-/tmp/distillscope-pairs}
STEPS=${STEPS:-4}

if ! "$VENV/bin/python" -c "import distillscope, torch" 2>/dev/null; then
  if python3 -c "import torch, transformers" 2>/dev/null; then
    # offline: reuse the system's torch/transformers, install distillscope itself only
    python3 -m venv --system-site-packages "$VENV"
    "$VENV/bin/pip" install -q --no-deps --no-build-isolation -e .
  else
    make setup VENV="$VENV"
  fi
fi
PY="$VENV/bin/python"

echo "== machine"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || true
"$PY" - <<'PYEOF'
import torch, transformers
assert torch.cuda.is_available(), "torch sees no CUDA device; this check needs one"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), transformers "
      f"{transformers.__version__}, {torch.cuda.device_count()} GPU(s): "
      f"{torch.cuda.get_device_name(0)}")
PYEOF

echo "== random-weight pairs at real vocabularies"
"$PY" bench/random_models.py --out "$PAIRS"

echo "== OnPD and OffPD steps (one JSON line per pair and policy)"
"$PY" bench/gpu_steps.py --pairs-dir "$PAIRS" --device cuda:0 --steps "$STEPS"
if [ "$("$PY" -c 'import torch; print(torch.cuda.device_count())')" -gt 1 ]; then
  echo "== the same with the teacher on cuda:1"
  "$PY" bench/gpu_steps.py --pairs-dir "$PAIRS" --device cuda:0 --teacher-device cuda:1 \
    --steps "$STEPS"
fi

echo "== gpu-marked tests"
"$PY" -m pytest -q -rs -p no:cacheprovider -m gpu tests/test_gpu.py
