#!/usr/bin/env bash
# One prepared check for a lent GPU machine (no network needed once torch is installed):
#   bash bench/gpu_check.sh            # ≤ 10 minutes on one H100/H200 (BUDGET_S, below)
# 1. a virtual environment (.venv, reusing a system torch if one is installed);
# 2. random-weight pairs at real vocabularies (Llama 3: 128,256; Qwen2.5: 151,936), built locally;
# 3. a few OnPD and OffPD steps on each: tokens/s, peak memory, time split (bench/gpu_steps.py),
#    with the teacher on a second GPU as well when there is one;
# 4. the gpu-marked tests (train, eval and a two-run study on CUDA).
# Then four parts, each guarded: one that cannot run prints "-- NAME: skipped: why" (a missing
# vLLM, no time left) or "-- NAME: failed (exit N)", and the rest goes on; each runs under
# `timeout`, at most its cap and never past BUDGET_S (600 s) from the start. The end lists the
# parts not done. Parts 1–4 take ~5 minutes, so with the default budget the last parts can be cut
# short (they say so): BUDGET_S=900 gives every part its full cap.
# 5. vLLM rollouts: a vLLM venv (.venv-vllm: the system's vLLM when importable, else
#    `make .venv-vllm/.installed`, which pip-installs `-e .[vllm]` on a GPU machine), then
#    bench/bench_rollout_engines.py — two Markdown tables: tokens/s of generate(), the built-in
#    sampler, vLLM generate and the vLLM rollout on the testbed and at Qwen2.5-0.5B's shape
#    (V = 151,936), and time/rollout and time/step of a testbed OnPD step per engine (the script
#    has no device flag: vLLM runs on the GPU, the transformers rows where torch puts them);
# 6. the served teacher: vLLM's OpenAI server on 127.0.0.1 with the random real-shape teacher
#    (bench/random_models.py --real-shape 2: Qwen2.5-3B's layer shape, 2 layers), a few OnPD
#    steps of its student against it with a top-16 teacher; prints the server's start time,
#    then one line per step (loss, tokens/s, time/teacher, time/step); the server is stopped;
# 7. one run on several processes: `distillscope train --launcher accelerate --num-processes 2`
#    on the Qwen2.5-vocabulary pair when 2 GPUs exist; on one GPU the launcher refuses fewer
#    than 2, so it runs `accelerate launch --num_processes 1 -m distillscope.cli train` (the
#    same launch, docs/scaling.md) and says so; prints one line per step as in 6; with 2 GPUs
#    the same run again with --fsdp (the student's layers sharded, NCCL);
# 8. bench/bench_vocab_scaling.py --device cuda, N = 8,192 … 65,536 tokens: the Markdown table
#    of tokens/s and peak CUDA memory of the exact forward KL, reverse KL and JSD at
#    V = 151,936, H = 896, fused / plain / Liger, the fused-vs-plain agreement and verl's bar.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PAIRS=${PAIRS:-/tmp/distillscope-pairs}
STEPS=${STEPS:-4}
BUDGET_S=${BUDGET_S:-600}
VLLM_VENV=${VLLM_VENV:-.venv-vllm}
PORT=${PORT:-8011}
RUNS=${RUNS:-/tmp/distillscope-gpu-runs}

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

# ---------------------------------------------------------------------------------------------
# Parts 5–8: each guarded; a part that fails or cannot run says why and the next one runs.
# ---------------------------------------------------------------------------------------------
NOT_DONE=()

part() {  # part NAME CAP_S COMMAND...: COMMAND under timeout min(CAP_S, what BUDGET_S leaves)
  local name=$1 cap=$2 left rc=0
  shift 2
  left=$((BUDGET_S - SECONDS))
  echo "== $name"
  if [ "$left" -lt 30 ]; then
    echo "-- $name: skipped: ${left} s left of BUDGET_S=${BUDGET_S}"
    NOT_DONE+=("$name (no time left)")
    return 0
  fi
  [ "$cap" -lt "$left" ] || cap=$left
  # a function runs in a child bash (timeout needs a program; it signals the child's whole
  # process group, so a server that a part started stops with it)
  timeout --kill-after=20 "$cap" bash -c '"$@"' part "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "-- $name: stopped after its ${cap} s"
    NOT_DONE+=("$name (timed out at ${cap} s)")
  elif [ "$rc" -ne 0 ]; then
    echo "-- $name: failed (exit $rc)"
    NOT_DONE+=("$name (exit $rc)")
  fi
  return 0
}

print_steps() {  # print_steps RUN_DIR: one line per logged step
  "$PY" - "$1" <<'PYEOF'
import sys
from distillscope.store import read_metrics
for i, r in enumerate(read_metrics(sys.argv[1])):
    print(f"step {r.get('step', i)}: loss {r['train/loss']:.4f}, "
          f"{r['perf/tokens_per_s']:.0f} tokens/s, time/teacher {r.get('time/teacher', float('nan')):.2f} s, "
          f"time/step {r['time/step']:.2f} s")
PYEOF
}

vllm_venv() {  # a venv where `import vllm, distillscope` works, or exit 1 saying why
  if "$VLLM_VENV/bin/python" -c "import vllm, distillscope" 2>/dev/null; then return 0; fi
  if python3 -c "import vllm" 2>/dev/null; then  # offline: the system's vLLM
    python3 -m venv --system-site-packages "$VLLM_VENV"
    "$VLLM_VENV/bin/pip" install -q --no-deps --no-build-isolation -e .
  else
    make "$VLLM_VENV/.installed" VLLM_VENV="$VLLM_VENV"  # on a GPU machine: pip -e .[vllm]
  fi
  "$VLLM_VENV/bin/python" -c "import vllm, distillscope; print('vLLM', vllm.__version__)"
}

served_teacher() {  # vLLM's OpenAI server with the real-shape teacher, a few OnPD steps, stop
  local pair="$PAIRS/qwen2.5-shape-L2" log="$RUNS/vllm-server.log" pid rc=0 waited=0
  "$PY" bench/random_models.py --out "$PAIRS" --pairs --real-shape 2 >/dev/null
  mkdir -p "$RUNS"
  "$VLLM_VENV/bin/python" -m vllm.entrypoints.openai.api_server --model "$pair/teacher" \
    --host 127.0.0.1 --port "$PORT" --dtype float32 --max-logprobs -1 --max-model-len 1024 \
    --enforce-eager --seed 0 --gpu-memory-utilization 0.3 >"$log" 2>&1 &
  pid=$!
  until "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
    "http://127.0.0.1:$PORT/health" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -ge 180 ]; then
      echo "vLLM's server did not come up in ${waited} s; its log ends:"
      tail -n 20 "$log"
      kill "$pid" 2>/dev/null || true
      return 1
    fi
    sleep 2
    waited=$((waited + 2))
  done
  echo "vLLM's server answered /health after ${waited} s"
  rm -rf "$RUNS/served"
  "$VENV/bin/distillscope" train "model.teacher=http://127.0.0.1:$PORT/v1" \
    "model.student=$pair/student" model.device=cuda:0 objective.teacher_topk=16 \
    objective.teacher_temperature=1.0 task.name=countdown3 task.prompt_format=chat \
    task.max_new_tokens=128 rollout.prompts_per_step=16 "optim.steps=$STEPS" \
    optim.warmup_steps=1 checkpoint_every=0 --skip-eval --out "$RUNS/served" || rc=$?
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  [ "$rc" -eq 0 ] && print_steps "$RUNS/served"
  return "$rc"
}

several_processes() {  # 2 ranks when 2 GPUs exist, else 1 rank through accelerate itself
  local pair="$PAIRS/qwen2-151936" gpus
  local args=(train "model.teacher=$pair/teacher" "model.student=$pair/student" model.device=cuda
    task.name=countdown3 task.prompt_format=chat task.max_new_tokens=64
    rollout.prompts_per_step=16 "optim.steps=$STEPS" optim.warmup_steps=1 checkpoint_every=0
    --skip-eval --out "$RUNS/accelerate")
  gpus=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
  rm -rf "$RUNS/accelerate"
  if [ "$gpus" -gt 1 ]; then
    echo "$gpus GPUs: 2 processes, one GPU each"
    "$VENV/bin/distillscope" "${args[@]}" --launcher accelerate --num-processes 2 || return 1
    print_steps "$RUNS/accelerate"
    echo "the same with the student's layers sharded (--fsdp, NCCL)"
    rm -rf "$RUNS/fsdp"
    "$VENV/bin/distillscope" "${args[@]}" --out "$RUNS/fsdp" --launcher accelerate \
      --num-processes 2 --fsdp || return 1
    print_steps "$RUNS/fsdp"
    return 0
  else
    echo "one GPU: 1 process through accelerate launch (--launcher needs at least 2)"
    "$PY" -m accelerate.commands.launch --num_processes 1 --num_machines 1 \
      -m distillscope.cli "${args[@]}" || return 1
  fi
  print_steps "$RUNS/accelerate"
}

export VENV PY PAIRS STEPS VLLM_VENV PORT RUNS
export -f print_steps vllm_venv served_teacher several_processes
if part "vLLM venv" 240 vllm_venv && "$VLLM_VENV/bin/python" -c "import vllm" 2>/dev/null; then
  part "vLLM rollouts (bench/bench_rollout_engines.py)" 150 \
    "$VLLM_VENV/bin/python" bench/bench_rollout_engines.py --repeats 2
  part "served teacher (vLLM OpenAI server, top-16)" 200 served_teacher
else
  echo "-- vLLM rollouts, served teacher: skipped: no importable vLLM in $VLLM_VENV"
  NOT_DONE+=("vLLM rollouts (no vLLM)" "served teacher (no vLLM)")
fi
part "one run, several processes (accelerate)" 120 several_processes
part "exact losses at V = 151,936 as tokens grow" 180 \
  "$PY" bench/bench_vocab_scaling.py --device cuda --start-tokens 8192 --max-tokens 65536

echo "== done in ${SECONDS} s"
if [ "${#NOT_DONE[@]}" -gt 0 ]; then
  printf -- '-- not done: %s\n' "${NOT_DONE[@]}"
fi
