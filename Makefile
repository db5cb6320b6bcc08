# The two commands (README): `make demo` and `make test`. Everything lands inside the repo:
# .venv (Python deps + the MPICH wheel), .mpi/<name> (other MPI wheels), build/<name>.
PYTHON ?= python3
VENV   := .venv
HMB    := $(VENV)/bin/hmb
HMB_MPI ?= mpich
# The demo sets the libraries side by side; HMB_MPI given (HMB_MPI=openmpi make demo) runs that one.
HMB_DEMO_MPI ?= $(if $(filter command line environment,$(origin HMB_MPI)),$(HMB_MPI),mpich$(COMMA)openmpi)
COMMA := ,

# pytest caches its rewritten test modules (and Python the package's bytecode) in __pycache__:
# with PYTHONDONTWRITEBYTECODE set, every test process, each xdist worker, compiled them again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast test-lab test-packaging check setup build clean container
# The demo is the small studies: each seed paper's headline figure, fitted to this machine.
demo: setup
	$(HMB) study demo --mpi $(HMB_DEMO_MPI)

# Two pytest-xdist workers, --dist loadgroup: the `mpi` tests (they build or launch hmb-bench) are
# one work unit, run one after the other on one worker, so no two launches share the cores; the
# rest runs on the other worker meanwhile (tests/conftest.py, pytest_xdist_make_scheduler). One
# closing summary line.
test: setup
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup

# Nodes on this machine and a real Slurm on them (root, ip netns; installs Debian's Slurm where it is
# missing): docs/lab.md. Separate from `make test`, which needs neither.
# tests/test_lab_reframe.py runs HMB's ReFrame library on the lab's Slurm: its tools first.
test-lab: setup
	scripts/packaging-tools.sh
	$(VENV)/bin/python -m pytest -m lab tests/test_lab_nodes.py tests/test_lab_reframe.py

# Where HPC centres run benchmarks (docs/toolkit.md): HMB's ReFrame library on this machine with
# both wheels, the EasyBuild module built and loaded with Lmod. Installs its tools first
# (scripts/packaging-tools.sh: the frameworks extra, Debian's lmod).
test-packaging: setup
	scripts/packaging-tools.sh
	$(VENV)/bin/python -m pytest -m packaging tests/test_packaging.py

# The tests that need no MPI library (formulas, parsing, reports, studies, error paths), on every
# core (pytest-xdist: nothing here launches a library, so nothing measures another's load). Tests
# that build or launch hmb-bench are marked `mpi` when collected (tests/conftest.py); HMB_NO_MPI=1
# makes any unmarked test that reaches for a library fail, naming itself.
# --dist worksteal: an idle worker takes tests queued for the other, so a few slow tests do not
# leave one worker waiting while the other still has a queue.
# Many of these tests read what hmb-bench declares (its launch needs, options, metrics) without
# launching it, so the default MPI's hmb-bench is built first (seconds when it is up to date).
test-fast: build
	HMB_NO_MPI=1 $(VENV)/bin/python -m pytest -m "not mpi and not lab and not packaging" -q -n auto --dist worksteal

# Machine physics (binding, timer, calibration, clocks, latency, async): PASS/WARN/FAIL per expectation.
check: setup
	$(HMB) check --mpi $(HMB_MPI)

setup: $(VENV)/.ready

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]' mpich
	touch $@

build: setup
	$(HMB) build --mpi $(HMB_MPI)

# The Containerfile built and run with Charliecloud (not part of `make test`): docs/container.md.
container:
	scripts/container.sh

clean:
	rm -rf build results
