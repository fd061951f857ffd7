# Entry points that work on a fresh machine (Python 3.10+ with venv):
#   make sweep      install commbench with MPI and run a real 4-rank sweep of all three collectives
#   make test       install commbench with MPI, torch (CPU) and test tools, and run the fast tier:
#                   every unit test and a few real jobs (pytest --tier fast; README, Development)
#   make test-all   the same install, and every test: real jobs at every world size, Slurm, Chromium,
#                   emulated clusters, nvcc, fuzzing, the acceptance suite (what .ci/run runs)
PYTHON ?= python3
VENV ?= .venv
# the CPU build of torch; on a GPU cluster set TORCH=torch (or your site's build)
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin

.PHONY: sweep test test-all install-mpi install-all

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install-mpi: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[mpi]'

install-all: $(BIN)/python
	$(BIN)/python -m pip install -q '$(TORCH)'
	$(BIN)/python -m pip install -q -e '.[mpi,torch,test]'

sweep: install-mpi
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/commbench run -n 4 --backend mpi

test: install-all
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q --tier fast

test-all: install-all
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q --tier all
