# laneway's developer commands. On a fresh machine `make demo` and `make test` set everything up:
# a virtualenv in .venv with laneway installed in editable mode (runtime dependencies only for
# the demo, plus the dev extras for the tests), and (for the tests) a single-node Kafka broker
# on 127.0.0.1 whose jars scripts/kafka fetches once with Maven.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-installed
DEV := $(VENV)/.dev-installed
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
# 'compat' puts the checkout on sys.path through a .pth file, so type checkers and other
# static tools run from the venv see laneway too (the default mode hides it behind an
# import hook).
EDITABLE := --config-settings editable_mode=compat -e
LINT_PATHS := $(wildcard laneway tests examples docs/rest_roles.py docs/readme_links.py noxfile.py setup.py scripts/generate-docs scripts/flakes)

.PHONY: venv demo test test-with-services suite pythons-beside test-pythons check test-jaeger test-cluster test-compat flakes soak lint docs pythons package kafka-start kafka-stop clean

venv: $(DEV)

# Each re-installs whenever pyproject.toml changes; the dev install includes the runtime one.
$(RUNTIME): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) $(EDITABLE) .
	touch $@

$(DEV): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) $(EDITABLE) '.[dev]'
	touch $@ $(RUNTIME)

demo: $(RUNTIME)
	$(BIN)/laneway demo

# Lint, type-check and build the docs first (no services needed); then, with a real broker,
# a real PostgreSQL (LANEWAY_BROKER / LANEWAY_POSTGRES_DSN if set, else servers
# scripts/with-services starts and stops again) and Debian's chromium for the status page's
# tests (LANEWAY_CHROMIUM, else scripts/chromium installs the package when missing), two
# things side by side: every test on the development Python, and at a lower CPU priority
# (nice) the package (a wheel per Python, compiled) followed by what can differ between
# Pythons on the other supported ones (the unit tests, the compiled core, every module
# imported, the engine contract on the embedded log: noxfile.py's quick session; their
# whole server-free repeat is `make test-pythons`, which .ci/run runs afterwards). Most of
# the first waits (group joins, restarts, backoffs), so it runs on two pytest-xdist
# workers, a file's tests on one of them, and the second takes the CPU it leaves. The
# `timing` tests, which assert bounds that a busy machine can break, run alone afterwards.
# The Jaeger round trip (the `jaeger` tests) is `make test-jaeger`, and the three-broker
# cluster's (the `cluster` tests) `make test-cluster`, which .ci/run runs after this. Timed in
# docs/project/developing.md.
test: lint docs
	scripts/with-services kafka postgres chromium -- $(MAKE) --no-print-directory test-with-services

# `make test`'s part that needs the servers (their addresses in the environment).
test-with-services:
	$(MAKE) --no-print-directory -j suite pythons-beside
	$(BIN)/pytest -q -m timing

pythons-beside:
	nice -n 10 $(MAKE) --no-print-directory pythons

suite: $(DEV)
	$(BIN)/pytest -q -n 2 --dist loadfile -m "not timing and not jaeger and not cluster and not compat"

# The inner loop: lint and types, then the unit and contract tests that need no server on
# two workers (the embedded log's contract cases included). Timed in developing.md.
check: lint
	$(BIN)/pytest -q -n 2 -m "not kafka and not cluster and not postgres and not browser and not jaeger" tests/unit tests/contracts

# laneway run exporting its spans over OTLP to a real Jaeger, read back from its query API
# (the tests marked `jaeger`, ~20 s on Kafka, PostgreSQL and Jaeger). Apart from `make test`
# because the first `scripts/jaeger start` in a checkout builds Jaeger from its Go module
# (267 MB of module downloads, 1.3 GB unpacked; 9 min 51 s and 592 CPU seconds on this
# 2-core machine, 11 min and 641 s beside other work), which would take a fresh `make test`
# past 15 minutes; later starts take a second.
test-jaeger: $(DEV)
	scripts/with-services kafka postgres jaeger -- $(BIN)/pytest -q -m jaeger

# The tests on a three-broker KRaft cluster (`scripts/kafka start --brokers 3`, the tests
# marked `cluster`): leader failover, a frozen broker, rolling restarts, truncation by an
# unclean leader election, under both group protocols. Apart from `make test` because three
# JVMs and their chaos take most of this
# 2-core machine most of the run: the cluster starts in ~30 s and every scenario waits out
# Kafka's own failure detection (a broker is fenced 9 s after its last heartbeat).
test-cluster: $(DEV)
	scripts/with-services kafka-cluster -- $(BIN)/pytest -q -m cluster

# The fast suites (make check's tests) FLAKE_RUNS times in shuffled orders (scripts/flakes):
# every test that failed in any run, with its seed and a command that replays it. Run it
# before submitting.
FLAKE_RUNS ?= 3
flakes: $(DEV)
	scripts/flakes $(FLAKE_RUNS)

# The compatibility suite (tests/compat, the tests marked `compat`) on each Kafka release of
# COMPAT_VERSIONS, run with Kafka's own server defaults (`scripts/kafka start --version V
# --defaults`: topics auto-created, the 3 s initial rebalance delay, the release's group
# protocols): the default consumer on every engine, kill -9 and restart, results and
# exactly-once, dead letters, the state store, laneway run, lag, top, status, share groups
# where the broker has them. The versions run side by side, each on its own broker, and each
# prints its own log (.compat/VERSION.log). Timed in docs/project/developing.md.
COMPAT_VERSIONS ?= 3.9.1 4.4.0
test-compat: $(DEV)
	@mkdir -p .compat
	$(MAKE) --no-print-directory -j $(words $(COMPAT_VERSIONS)) $(addprefix compat-,$(COMPAT_VERSIONS))

compat-%: $(DEV)
	@scripts/with-services kafka@$*-defaults -- $(BIN)/pytest -q -p no:cacheprovider -m compat tests/compat \
		>.compat/$*.log 2>&1 \
		&& grep -E '[0-9]+ passed' .compat/$*.log | tail -n 1 | sed 's/^/Kafka $* (defaults): /' \
		|| { tail -n 80 .compat/$*.log; echo "Kafka $* (defaults): failed (log: .compat/$*.log)"; exit 1; }

# Thirty minutes (SOAK_MINUTES) on the cluster: a steady producer, laneway run members killed
# every few minutes and a broker restarted every ten; prints lost (must be 0), duplicates,
# p99 latency per 5 minutes and each member's RSS over time (see tests/soak/). Not part of
# any other target. The last run's report: docs/results/soak.md.
SOAK_MINUTES ?= 30
soak: $(DEV)
	SOAK_MINUTES=$(SOAK_MINUTES) scripts/with-services kafka-cluster -- $(BIN)/python tests/soak/run.py

# The documentation site into site/; --strict turns a broken link, anchor or API reference
# into a failure. Not --quiet: it hides the warnings that --strict would fail on.
docs: $(DEV)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# What can differ between Pythons (noxfile.py's quick session) on the supported Pythons other
# than the development one (which runs everything in `make test`, on the Python source of
# its editable install), side by side, each against the compiled wheel `package` built for
# it; see noxfile.py. `.venv/bin/nox` alone runs all four, one after the other. The venv is made
# from $(PYTHON), so its version is the development one even before the venv exists.
OTHER_PYTHONS := $(filter-out $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null),3.10 3.11 3.12 3.13)
NOX_SESSION ?= quick
pythons: package
	$(MAKE) --no-print-directory -j $(words $(OTHER_PYTHONS)) $(addprefix python-,$(OTHER_PYTHONS))

# The whole server-free repeat (noxfile.py's tests session) on the other Pythons, on the
# wheels `make package` (part of `make test`) left in dist/; .ci/run runs it after make test.
test-pythons: $(DEV)
	@ls dist/laneway-*-cp*.whl >/dev/null 2>&1 || { echo "no wheels in dist/: make package first"; exit 1; }
	$(MAKE) --no-print-directory -j $(words $(OTHER_PYTHONS)) NOX_SESSION=tests $(addprefix python-,$(OTHER_PYTHONS))

python-%: $(DEV)
	@mkdir -p .nox
	@LANEWAY_WHEEL="$(abspath $(wildcard dist/laneway-*-cp$(subst .,,$*)-*.whl))" $(BIN)/nox --sessions $(NOX_SESSION)-$* \
		>.nox/$(NOX_SESSION)-$*.log 2>&1 \
		&& grep -E '[0-9]+ passed' .nox/$(NOX_SESSION)-$*.log | tail -n 1 | sed 's/^/Python $* ($(NOX_SESSION)): /' \
		|| { tail -n 80 .nox/$(NOX_SESSION)-$*.log; echo "Python $* ($(NOX_SESSION)): failed (log: .nox/$(NOX_SESSION)-$*.log)"; exit 1; }

# The sdist and, built from it, a wheel per supported Python with the per-message modules
# compiled (setup.py) into dist/; the development Python's wheel and the sdist without a C
# compiler each installed into a fresh venv: laneway --version, laneway demo, which code
# runs, and (wheel) a user's handler test with the pytest plugin.
package: $(DEV)
	scripts/check-package $(BIN)/python

# ruff, mypy, and the import layering of pyproject.toml's [tool.importlinter] contracts.
lint: $(DEV)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

kafka-start:
	@scripts/kafka start

kafka-stop:
	@scripts/kafka stop

clean:
	scripts/kafka stop
	scripts/postgres stop
	scripts/jaeger stop
	rm -rf $(VENV) .kafka .compat .postgres .jaeger .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache .nox site build dist *.egg-info
