# The single entry point: make install | run | test | lint | bench
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Python here may come with PYTHONDONTWRITEBYTECODE=1: every process would then compile schedd's
# ~100 modules from source again (90 ms of CPU per node or schedctl start, hundreds of them in a
# test run) and pytest would rewrite every test module's asserts in every worker.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install run test check lint bench bench-compare bench-retention bench-brokers bench-console chaos dist clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/schedd dev

# The whole suite, TEST_WORKERS test files at a time (pytest-xdist; docs/testing.md). The
# console's browser tests (tests/browser) drive Debian's chromium, and the two-cell test
# (tests/cluster/test_cells_cluster.py) Debian's etcd-server (its own etcd on free ports, never
# the system service): installed here when missing and running as root; elsewhere they skip
# saying why (under CI=true they fail).
TEST_WORKERS ?= 5
test: $(STAMP) test-tools
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: test-tools
test-tools:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi
	@if [ ! -x /usr/bin/etcd ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null; \
		if command -v systemctl >/dev/null; then systemctl disable --now etcd >/dev/null 2>&1 || true; fi; fi

# The inner loop of a change: the unit tests and the integration tests not marked slow, no
# cluster, no browser (about a minute and a half; docs/testing.md).
check: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not cluster and not slow" tests/unit tests/integration

lint: $(STAMP)
	$(BIN)/ruff check schedd tests benchmarks
	$(BIN)/ruff format --check schedd tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python benchmarks/bench_schedule.py
	$(BIN)/python benchmarks/bench_apply.py
	$(BIN)/python benchmarks/bench_api.py
	$(BIN)/python benchmarks/bench_dispatch.py
	@echo "(the 1,000,000-job benchmark takes minutes: $(BIN)/python benchmarks/bench_scale.py)"
	@echo "(installing a 1 GB snapshot on a follower takes about 2 minutes: $(BIN)/python benchmarks/bench_snapshot_install.py)"

# BullMQ (npm, a private redis-server) and schedd on one and three nodes, the same spike, side by
# side (issue 16): about 5-8 minutes at the default N=100,000; ARGS="--n 5000" for a short run.
bench-compare: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]' && $(BIN)/python benchmarks/compare.py $(ARGS)

# Retention under load (issue 14): 10 minutes, three nodes; ARGS="--duration 150" for a short run.
bench-retention: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]' && $(BIN)/python benchmarks/bench_retention.py $(ARGS)

# Broker targets (issue 17): per kind, a spike of 30,000 runs and 2,000 runs/s for 30 s on three
# nodes, into the loopback Redis, RabbitMQ and NATS; ARGS="--spike 5000 --rate 500 --duration 10"
# for a short run, ARGS="--kinds nats" for one kind.
bench-brokers: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]' && $(BIN)/python benchmarks/bench_brokers.py $(ARGS)

# The web console's list routes over one tenant with 1,000,000 jobs (issue 18): the store is built
# once (about 2 minutes) and cached under var/bench/; ARGS="--jobs 100000" for a smaller tenant.
bench-console: $(STAMP)
	$(BIN)/python benchmarks/bench_console_lists.py $(ARGS)

# The fault-injection campaign (docs/reliability.md): about ten minutes; SEED=N to start there.
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos $(if $(SEED),--seed $(SEED)) --duration 600 --report chaos-report.json

# Single-file zipapps for VMs without a Python set-up beyond python3: CPython 3.11 (any patch
# level), 3.12 and 3.13 on this machine's OS and CPU, each file checking that at start
# (tools/build_dist.py: conditional dependencies of the whole range, compiled parts per minor).
dist: $(STAMP)
	$(BIN)/python -m pip install --quiet shiv packaging
	rm -rf dist
	$(BIN)/python tools/build_dist.py --out dist

clean:
	rm -rf dist $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
