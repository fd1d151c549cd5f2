# Two commands for a newcomer: `make demo` and `make test`. Both install first.
# `make install` is idempotent: it only does work when something is missing or
# pyproject.toml changed since the last install.
SHELL := /bin/bash
# Bytecode caches on: without them every Ray worker (each broker and controller actor)
# compiles the project's sources again, and pytest rewrites every test module's asserts
# again on each run. The caches land in __pycache__ (gitignored).
unexport PYTHONDONTWRITEBYTECODE
# The interpreter of the venv: Debian's python3.11, built with profile-guided and link-time
# optimisation. The brokers are Python-bound: against a build without them (pyenv's
# default) the same cluster spends ~15 % less broker CPU per acks=all record (NOTES).
# `make PYTHON=python3` uses another; a venv made by another interpreter is made again.
PYTHON ?= /usr/bin/python3.11
DEBIAN_PYTHON := /usr/bin/python3.11 /usr/lib/python3.11/ensurepip/__init__.py \
	/usr/include/python3.11/Python.h
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha1sum | cut -c1-12)
ZK_JAR := /usr/share/java/zookeeper.jar
KCAT := /usr/bin/kcat
FUSE3_H := /usr/include/fuse3/fuse_lowlevel.h
NATS_SERVER := /usr/sbin/nats-server
KAFKA_LIBS := compat/kafka/build/libs/.stamp
CHROMEDRIVER := /usr/bin/chromedriver
CONSOLE_ASSETS := console/static/node_modules/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: install demo test test-unit chaos bench compat kafka-smoke kafka-tools check-clean clean-venv \
	console-shots

install: $(DEBIAN_PYTHON) $(ZK_JAR) $(KCAT) $(FUSE3_H) $(CHROMEDRIVER) $(CONSOLE_ASSETS) $(STAMP)

# Debian's Python 3.11 with venv (ensurepip) and its headers (pyfuse3 is built from source).
$(DEBIAN_PYTHON):
	@echo "== installing Debian packages python3.11, python3.11-venv, python3.11-dev"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		python3.11 python3.11-venv python3.11-dev >/dev/null

# kcat (librdkafka 2.0.2) is a Kafka client the protocol tests drive against the brokers.
# fuse3 (fusermount3), libfuse3-dev, pkg-config, gcc: build and run pyfuse3 (rayka/chaos/faultfs.py).
$(ZK_JAR) $(KCAT) $(FUSE3_H):
	@echo "== installing Debian packages (zookeeper, Java 17 runtime, kcat, FUSE 3)"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		zookeeper openjdk-17-jre-headless kcat fuse3 libfuse3-dev pkg-config gcc >/dev/null
	@test -f $(ZK_JAR) || { echo "zookeeper package did not provide $(ZK_JAR)"; exit 1; }
	@test -x $(KCAT) || { echo "kcat package did not provide $(KCAT)"; exit 1; }
	@test -f $(FUSE3_H) || { echo "libfuse3-dev did not provide $(FUSE3_H)"; exit 1; }

# Debian's chromium and its matching chromedriver: the console's tests drive a real headless
# browser with Selenium (no downloaded browser).
$(CHROMEDRIVER):
	@echo "== installing Debian packages chromium and chromium-driver (the console's tests)"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		chromium chromium-driver >/dev/null

# The console's browser libraries (htmx, uPlot), pinned by console/static/package-lock.json.
$(CONSOLE_ASSETS): console/static/package-lock.json /usr/bin/node /usr/bin/npm
	cd console/static && npm ci --silent --no-audit --no-fund --ignore-scripts
	@touch $@

$(STAMP): pyproject.toml Makefile
	@echo "== creating $(VENV) with pinned Python dependencies"
	@if [ -x $(PY) ] && [ "$$($(PY) -c 'import os, sys; print(os.path.realpath(sys._base_executable))')" \
		!= "$$(readlink -f "$$(command -v $(PYTHON))")" ]; then \
		echo "== $(VENV) was made by another Python than $(PYTHON): making it again"; rm -rf $(VENV); fi
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==25.3 setuptools==80.9.0 wheel==0.45.1
	$(PY) -m pip install -q -e '.[dev]'
	@echo "== compiling the record decoder of the consumer and the pipeline (numba cache)"
	$(PY) -c "from rayka.client import fastdecode; fastdecode.warm()"
	@rm -f $(VENV)/.installed-*
	@touch $@

demo: install
	$(VENV)/bin/rayka demo

# Tests without Ray (pure core, protocol, real ZooKeeper, sockets) run on both cores; the
# Ray, chaos and pipeline tests too, a module per worker (--dist loadfile: a module's
# cluster and fixtures stay in one process; each worker starts a Ray of its own). Serially
# they took 24 minutes on 2 cores, two at a time 17.7 (they wait on elections, timeouts and
# process starts as much as they compute).
test: install
	$(PY) -m pytest -m "not slow and not ray" -n 2 --durations=15 $(PYTEST_ARGS)
	$(PY) -m pytest -m "not slow and ray" -n 2 --dist loadfile --durations=40 $(PYTEST_ARGS)

# The long soaks (marked slow): every fault kind five times with librdkafka clients too.
chaos: install
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

test-unit: install
	$(PY) -m pytest -m unit $(PYTEST_ARGS)

# The peer benchmark needs nats-server (Debian); the package's own service is disabled:
# the bench starts its three servers on free loopback ports and stops them by pid.
$(NATS_SERVER):
	@echo "== installing Debian package nats-server (benchmark peer)"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		nats-server >/dev/null
	-$(SUDO) systemctl disable --now nats-server >/dev/null 2>&1

# bench/results/<date>.json + PNGs; e.g. make bench BENCH_ARGS="--quick --runs 1 --only log,peers"
# (the side-by-side suite, `--only kafka`, runs Apache Kafka 3.9 from Maven's jars)
bench: install $(NATS_SERVER) $(KAFKA_LIBS)
	$(PY) bench/run_all.py $(BENCH_ARGS)

# Peer suites (not part of `make test`: hours), one table at the end (compat/run.py):
# librdkafka's own integration tests, built from the pinned snapshot in compat/ (with Kafka's
# own tools from Maven as KAFKA_PATH); Kafka's Java client 3.9 and 4.x, Kafka's CLI tools
# (compared with Apache Kafka 3.9 itself), Kafka Streams, Kafka Connect and MirrorMaker 2,
# Spark's Kafka connector on RayDP (Maven, pinned by the pom.xml files under compat/);
# franz-go's kgo tests and a sarama check (Go modules, pinned by compat/go/go.mod); kafkajs
# (npm, pinned by compat/kafkajs/package-lock.json), a quixstreams exactly-once app in a
# venv of its own (it pins an older confluent-kafka) and Burrow's lag (Debian's burrow).
# e.g. make compat COMPAT_ARGS="--suites java-client,sarama"; COMPAT_ARGS="--target kafka":
# the same suites against Apache Kafka 3.9 on this machine.
RDK_VERSION := 2.15.0
RDK_DIR := compat/build/librdkafka-$(RDK_VERSION)
RDK_RUNNER := $(RDK_DIR)/tests/test-runner
QUIX_VENV := compat/.venv-quix
KAFKAJS_DIR := compat/kafkajs
COMPAT_ARGS ?=

/usr/include/rapidjson/document.h:
	@echo "== installing Debian package rapidjson-dev (librdkafka's tests use it)"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		rapidjson-dev libssl-dev zlib1g-dev >/dev/null

# a stamp, not the header: the package keeps its files' dates, and a test-runner built
# without zstd before this rule existed must be built again
compat/build/.libzstd-dev:
	@test -f /usr/include/zstd.h || { echo "== installing Debian package libzstd-dev" \
		"(librdkafka's zstd codec)" && $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
		--no-install-recommends libzstd-dev >/dev/null; }
	mkdir -p compat/build && touch $@

$(RDK_RUNNER): compat/librdkafka-v$(RDK_VERSION).tar.gz /usr/include/rapidjson/document.h \
		compat/build/.libzstd-dev
	@echo "== building librdkafka $(RDK_VERSION)'s test suite (about 2 minutes)"
	rm -rf $(RDK_DIR) && mkdir -p compat/build && tar xzf $< -C compat/build
	cd $(RDK_DIR) && ./configure --disable-gssapi --disable-curl \
		--disable-lz4-ext >/dev/null && $(MAKE) -j2 libs >/dev/null && \
		$(MAKE) -C tests -j2 build >/dev/null

$(QUIX_VENV)/.installed: compat/quix-requirements.txt
	@test -x $(QUIX_VENV)/bin/python || $(PYTHON) -m venv $(QUIX_VENV)
	$(QUIX_VENV)/bin/python -m pip install -q -r compat/quix-requirements.txt
	@touch $@

# node and npm: Debian's nodejs and npm when missing (kafkajs needs node >= 14; the console's assets)
/usr/bin/node /usr/bin/npm:
	@echo "== installing Debian packages nodejs and npm (kafkajs's runtime)"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		nodejs npm >/dev/null

# npm ci wipes node_modules first, so this stamp goes whenever the lock changes
$(KAFKAJS_DIR)/node_modules/.installed: $(KAFKAJS_DIR)/package-lock.json /usr/bin/node /usr/bin/npm
	cd $(KAFKAJS_DIR) && npm ci --silent --no-audit --no-fund
	@touch $@

/usr/bin/Burrow:
	@echo "== installing Debian package burrow (LinkedIn's lag checker; its service stays off)"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq burrow >/dev/null
	-$(SUDO) systemctl disable --now burrow >/dev/null 2>&1

# Apache Kafka 3.9's own jars (Maven Central, pinned by compat/kafka/pom.xml): its CLI tools
# as librdkafka's tests call them (KAFKA_PATH), and Kafka itself as a peer. Maven and a JDK
# (javac: librdkafka's Java test helpers) from Debian; the jars are fetched once per pom.
/usr/bin/mvn /usr/bin/javac:
	@echo "== installing Debian packages maven and openjdk-17-jdk-headless (Kafka's jars, javac)"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		maven openjdk-17-jdk-headless >/dev/null

$(KAFKA_LIBS): compat/kafka/pom.xml /usr/bin/mvn /usr/bin/javac
	$(PY) compat/kafka/launcher.py libs

# Apache Kafka 3.9 itself on this machine (ZooKeeper mode, 3 brokers): its tools and clients
# against it, a broker killed and restarted; everything it starts is stopped by pid.
kafka-smoke: install $(KAFKA_LIBS)
	$(PY) compat/kafka/smoke.py

# Kafka 3.9's own CLI tools (105 scripted operator commands) against rayka, then against
# Apache Kafka 3.9 on this machine, one cluster at a time: a table, and exit 1 when a command
# that works on Kafka fails on rayka (about 11 minutes).
kafka-tools: install $(KAFKA_LIBS)
	$(PY) compat/kafka/tools_check.py compare --out compat/kafka/build/tools_check_results.json

compat: export PATH := $(PATH):/usr/local/go/bin
compat: install $(RDK_RUNNER) $(QUIX_VENV)/.installed /usr/bin/Burrow \
		$(KAFKAJS_DIR)/node_modules/.installed $(KAFKA_LIBS)
	$(PY) compat/run.py --librdkafka-tests $(RDK_DIR)/tests \
		--quix-python $(QUIX_VENV)/bin/python --out compat/build/compat_results.json \
		$(COMPAT_ARGS)

# Before merging: the committed HEAD, cloned into a fresh directory, passes `make test`.
# A screenshot of each console page (docs/console/*.png, shown in README) from a real
# cluster with traffic, taken by headless chromium.
console-shots: install
	$(PY) docs/console_shots.py --out docs/console

check-clean:
	@dir=$$(mktemp -d /tmp/rayka-clean-XXXXXX) && git clone -q . $$dir && \
	  echo "== make test in a clean clone at $$dir" && $(MAKE) -C $$dir test && rm -rf $$dir

clean-venv:
	rm -rf $(VENV)
