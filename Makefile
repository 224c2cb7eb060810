# Two commands do all set-up on a fresh machine:
#   make demo   — install, then run the main job (a controlled study on the built-in testbed)
#   make test   — install, then run the linter, the formatter check and the test suite
#   make bench  — install (with the bench-only extras: TRL, Liger), run every bench/ script and
#                 rewrite its table in BENCHMARKS.md (tens of minutes on 2 cores)
#   make mutate — mutation score of the core modules with mutmut (bench/mutate.py; MUTATE=split
#                 stats … for some; minutes per module, not in CI; BENCHMARKS.md "Mutation score")
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of PyTorch, installed first when no NVIDIA GPU is present, so that the
# package's own (ranged) torch requirement does not pull a multi-GB CUDA build.
TORCH_CPU ?= torch==2.13.0

.PHONY: setup demo test lint bench mutate

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install -q "$(TORCH_CPU)"; fi
	$(PY) -m pip install -q -e ".[dev,ray]"
	touch $@

demo: setup
	$(VENV)/bin/distillscope study

test: setup lint
	$(PY) -m pytest -q

bench: setup
	$(PY) -m pip install -q -e ".[dev,ray,bench]"
	$(PY) bench/update_benchmarks.py $(BENCH)

mutate: setup
	nice -n 19 $(PY) bench/mutate.py $(MUTATE)

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
