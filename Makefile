# Entry points that work on a fresh machine (Python 3.10+ with venv):
#   make sweep          install commbench with MPI and run a real 2-rank sweep of all three collectives
#   make test           install commbench with MPI, torch (CPU) and test tools, and run the fast tier:
#                       every unit test and a few real jobs (pytest --tier fast; README, Development)
#   make test-all       the same install, and every test: real jobs at every world size, Slurm, Chromium,
#                       emulated clusters, nvcc, fuzzing, the acceptance suite (what .ci/run runs)
#   make test-machines  the in-process tests that read a machine fact as a 1-core, a 64-core, a 300 MB-L3 and a
#                       4 MB-L3 machine (after make test-all, which notes them; else every in-process test)
#   make docs           build the documentation site (docs/, MkDocs) into site/, strictly: a broken link fails it
#   make docs-assets    remake docs/assets/ (a sample sweep's report and its screenshot; needs chromium)
#   make wheel-check    build the wheel, install it outside the clone and run every algorithm family from it
#   make test-latest    make test with the newest releases of every dependency but TORCH (not constraints.txt)
#   make constraints    refresh constraints.txt from the installed environment (on purpose, with a green test-all)
PYTHON ?= python3
VENV ?= .venv
# the CPU build of torch; on a GPU cluster set TORCH=torch (or your site's build)
TORCH ?= torch==2.13.0
# the releases installed (make test-latest: none)
CONSTRAINTS ?= -c constraints.txt
BIN := $(VENV)/bin
MACHINES := 1-core 64-core 300MB-L3 4MB-L3
FACTS_USERS := .pytest-facts-users

.PHONY: sweep test test-all docs docs-assets test-machines wheel-check test-latest constraints install-mpi install-all

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install-mpi: $(BIN)/python
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -e '.[mpi]'

install-all: $(BIN)/python
	$(BIN)/python -m pip install -q '$(TORCH)'
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -e '.[mpi,torch,test]'

sweep: install-mpi
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/commbench run -n 2 --backend mpi

test: install-all
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q --tier fast

test-all: install-all
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q --tier all --durations=25 --facts-users=$(FACTS_USERS)

# the tests that read a machine fact, as test-all noted them (without its note: every in-process test)
test-machines: install-all
	for m in $(MACHINES); do PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q --tier=fast --machine=$$m \
	  --facts-users=$(FACTS_USERS) tests || exit 1; done

docs: $(BIN)/python
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -e '.[docs]'
	$(BIN)/mkdocs build --strict --site-dir site

docs-assets: install-mpi
	rm -rf /tmp/commbench-docs-sample
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/commbench run -n 2 --sizes 8,1K,64K,1M -c all_reduce,all_gather \
	  -a native,ring_kernel --repeat 3 --out /tmp/commbench-docs-sample --quiet
	$(BIN)/commbench report /tmp/commbench-docs-sample --output docs/assets/sample-report.html
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,2200 \
	  --virtual-time-budget=8000 --screenshot=docs/assets/report.png docs/assets/sample-report.html

wheel-check:
	bash .ci/wheel_check.sh $(PYTHON)

test-latest:
	$(MAKE) test VENV=.venv-latest CONSTRAINTS=

constraints: install-all
	{ sed -n '1,3p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -viE '^(commbench|torch|filelock|fsspec|jinja2|markupsafe|mpmath|networkx|sympy|typing.extensions)=='; } > constraints.tmp && mv constraints.tmp constraints.txt
