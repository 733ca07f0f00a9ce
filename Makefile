# gattway — build, test, benchmark and demo. Every target installs the Debian packages it needs.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=
# Build tools and the C libraries we link, plus the real daemons the tests start themselves and
# what the state-directory tests mount file systems with (mkfs.ext4, mount -o loop); curl and
# promtool (Debian's prometheus) for the web server's end-to-end tests.
PACKAGES := pkg-config libdbus-1-dev libmosquitto-dev libssl-dev libmicrohttpd-dev dbus dbus-daemon dbus-bin \
            mosquitto mosquitto-clients openssl systemd libglib2.0-bin python3 python3-venv e2fsprogs mount \
            curl prometheus

.PHONY: all deps build release deb package-binary order-file bench-web-instructions test test-prepare test-prepare-start test-prepare-stop test-prepare-wait fuzz-binary venv-bleak venv-bleak-newest venv-oracles venv-esphome venv-esphome-ha2025.4 venv-homeassistant test-deb test-package test-package-vm test-swift test-examples test-fuzz test-oracles test-conformance test-esphome test-homeassistant test-bluez test-fleet-cluster test-fleet test-web bench-fleet check-layering check-conversions lint fuzz bench soak demo clean

all: build

deps:
	@scripts/install-deps.sh $(PACKAGES)

build: deps
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

# The build users install (deploy/install.sh) and `make bench` measures: release, static Swift
# runtime, and the link options of scripts/release-flags.sh (code laid out by deploy/gattway.order).
RELEASE_BUILD = $(shell SWIFT=$(SWIFT) scripts/release-flags.sh)

release: deps
	$(SWIFT) build $(RELEASE_BUILD) --product gattway $(SWIFT_BUILD_FLAGS)

# The Debian package (docs/raspberry-pi.md, "The Debian package"): the release build, staged in
# .build/deb/stage and packed by dpkg-deb into ./gattway_<version>_<arch>.deb, whose path it prints.
# DEB_VERSION=… sets the version (default: BuildInfo.version, 0.1.0-dev → 0.1.0~dev-1).
deb: deps
	@SWIFT=$(SWIFT) scripts/build-deb.sh

# The package in a fresh Debian 12 root (Tests/Package/test-deb.sh): built, checked by lintian,
# installed with apt from Debian's mirror, run, upgraded, purged. The root is made by mmdebstrap
# once and cached in .build/deb/root-cache (a cold run downloads it: about a minute more). Runs as
# root (chroot): through sudo otherwise, after the release build as the calling user.
test-deb: package-binary
	@sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  $$sudo env GATTWAY_BINARY="$(CURDIR)/$(PACKAGE_BINARY)" Tests/Package/test-deb.sh

# The binary test-deb and test-package-vm package: PACKAGE_BUILD=release (the default: what
# `make deb` ships) or debug (the debug build linked with the static Swift runtime, a 20 s relink
# of what test-swift built). `make test` packages the debug one: the release build takes 13 minutes
# from a clean clone on 2 cores, which would take the suite past its 40; the package, its
# maintainer scripts, its Depends, and what dpkg and systemd do with it are the same.
PACKAGE_BUILD ?= release
PACKAGE_BINARY = .build/deb/gattway-$(PACKAGE_BUILD)
package-binary: deps
	@if [ "$(PACKAGE_BUILD)" = release ]; then \
	  $(SWIFT) build $(RELEASE_BUILD) --product gattway $(SWIFT_BUILD_FLAGS) \
	    && bin="$$($(SWIFT) build $(RELEASE_BUILD) --show-bin-path $(SWIFT_BUILD_FLAGS))"; \
	else \
	  $(SWIFT) build --product gattway --static-swift-stdlib $(SWIFT_BUILD_FLAGS) \
	    && bin="$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))"; \
	fi && install -D -m 0755 "$$bin/gattway" $(PACKAGE_BINARY)

# The package under the real systemd (issue 34, item 2; Tests/RealBlueZ/test-package-vm.sh): the
# real-BlueZ VM booted with systemd as PID 1, the package installed there with dpkg, its service
# checked: user, capabilities, sandbox, the management socket as radio, a reading on MQTT, the
# adapter's state on the web page, the watchdog, stop, remove and purge. About 5 minutes.
test-package-vm: package-binary
	@deb=$$(GATTWAY_BINARY="$(CURDIR)/$(PACKAGE_BINARY)" DEB_OUTDIR=.build/deb/vm DEB_COMPRESS=gzip \
	  scripts/build-deb.sh | tail -n1) && Tests/RealBlueZ/test-package-vm.sh "$$deb"

# Both package lanes, as `make test` runs them (the debug build packaged; see PACKAGE_BUILD).
test-package:
	$(MAKE) test-deb test-package-vm PACKAGE_BUILD=debug

# Regenerates deploy/gattway.order from a profile of `gattway run` on the simulator's demo world
# under callgrind (scripts/profile-order.py); commit the result. Not part of `make test`.
order-file: deps
	@scripts/install-deps.sh valgrind binutils
	$(PYTHON) scripts/profile-order.py

check-layering:
	@scripts/check-layering.sh

# Numeric conversions under Sources/ that a grep can tell would trap (Int64 of a Double, …);
# the self-test first shows the script still catches each pattern.
check-conversions:
	@scripts/check-conversions.sh --self-test
	@scripts/check-conversions.sh

# The whole suite: the formatting rules (lint), layering and conversion rules, then every Swift test (unit tests and
# integration tests against a private dbus-daemon and a real mosquitto that the tests start and
# stop), then a short coverage-guided run of every fuzz target, then bleak against the BlueZ
# simulator, then the oracle lane (seeded random advertisements per family, decoded by gattway and
# by the maintained PyPI parser of that family), then aioesphomeapi and Home Assistant itself against
# the Bluetooth proxy, then the real-BlueZ lane (real bluetoothd in a qemu VM; the VM files are built into
# .build/realbluez on the first run, so a clean clone builds them), the fleet and web lanes, and last the
# Debian package (test-package: in a fresh Debian 12 root, then under systemd in the VM).
# test-examples (the example package with its own Swift parsers) comes right after the Swift
# tests, whose build it reuses. While the end-to-end tests run (one gateway at a time, mostly
# waiting on the simulator and the broker), test-prepare builds the fuzz binary and makes the test
# instruments' virtualenvs in the background at the lowest priority, so that the lanes after find
# them ready (below).
test: TEST_PREPARE = 1
test: deps lint check-layering check-conversions test-swift test-examples test-prepare-wait test-fuzz test-oracles test-conformance test-esphome test-homeassistant test-bluez test-fleet test-web test-package

# Unit and integration tests run in parallel; the end-to-end tests (each starts a bus, the
# simulator, mosquitto and `gattway run`) one at a time after them, so a 2-core machine is not
# asked to run a dozen gateways at once (about a minute longer, much less timing noise).
test-swift:
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	$(SWIFT) test --skip-build $(SWIFT_BUILD_FLAGS) --skip EndToEndTests
	$(if $(TEST_PREPARE),@$(MAKE) --no-print-directory test-prepare-start)
	@status=0; $(SWIFT) test --skip-build $(SWIFT_BUILD_FLAGS) --no-parallel --filter EndToEndTests || status=$$?; \
	  [ "$$status" = 0 ] || $(MAKE) --no-print-directory test-prepare-stop; exit $$status

# What the lanes after the Swift tests need from outside the Swift build: the fuzz binary and the
# test instruments' virtualenvs (each target below is a no-op when its product is up to date).
# `make test` runs this in the background during the end-to-end tests (test-prepare-start): in a
# session of its own (setsid) at nice 19, so a gateway under test keeps the CPU it asks for, the
# build and two pip installs at once (-j3), output in .build/test-prepare.log. test-prepare-wait
# waits for it before the first lane that needs it; when it failed, its log's end is printed and
# each lane makes what is missing itself (and fails with its own output). A run still going from an earlier, interrupted `make test` is
# stopped first (two pip installs into one virtualenv would break it), as it is when the
# end-to-end tests fail.
test-prepare: fuzz-binary venv-bleak venv-bleak-newest venv-oracles venv-esphome venv-esphome-ha2025.4 venv-homeassistant
test-prepare-start: test-prepare-stop
	@mkdir -p .build && rm -f .build/test-prepare.status
	@echo "test-prepare: the fuzz binary and the test virtualenvs, in the background (nice 19; log .build/test-prepare.log)"
	@setsid sh -c 'nice -n 19 $(MAKE) -j3 --no-print-directory test-prepare; echo $$? > .build/test-prepare.status' \
	  > .build/test-prepare.log 2>&1 < /dev/null & echo $$! > .build/test-prepare.pid
test-prepare-stop:
	@pid=$$(cat .build/test-prepare.pid 2>/dev/null || true); \
	  if [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null; then kill -TERM "-$$pid" 2>/dev/null || true; fi; \
	  rm -f .build/test-prepare.pid
test-prepare-wait:
	@pid=$$(cat .build/test-prepare.pid 2>/dev/null || true); \
	  while [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null; do sleep 1; done; \
	  if [ -n "$$pid" ]; then \
	    status=$$(cat .build/test-prepare.status 2>/dev/null || echo "none"); \
	    if [ "$$status" = 0 ]; then echo "test-prepare: ready"; \
	    else echo "test-prepare: failed (status $$status); the lanes make what is missing. Its log's end:"; tail -n 20 .build/test-prepare.log; fi; \
	  fi; rm -f .build/test-prepare.pid

# Swift parsers without a fork (docs/parsers.md, "Your own Swift parsers"): Examples/custom-parser, a
# package of its own whose main.swift is `Gattway.main(parsers: [StrapPulse()], advertisementParsers:
# [MysteryTag()])`, built and run end to end by Tests/Examples/run.sh: a private bus with the simulator
# playing the example's scenario, a real mosquitto on loopback, `config check` (passes in the
# example's binary, fails in plain gattway naming the parser), `decode`, and `run` with readings of
# both parsers checked on MQTT; prints `N passed, N failed`. The example builds in this package's
# own scratch path, so gattway's modules are not compiled a second time (about 30 s for the
# example's files and the link; a scratch path of its own would cost a second full build of
# gattway). SwiftPM keeps one cached build plan per scratch path and would reuse this package's
# plan for the example (or, afterwards, the example's for this package), hence
# --disable-build-manifest-caching on both builds that follow; the second one puts this package's
# plan back, also when the example's build fails.
EXAMPLE_BUILD = --package-path Examples/custom-parser --scratch-path .build --disable-build-manifest-caching
test-examples: deps
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	@status=0; $(SWIFT) build $(EXAMPLE_BUILD) --product custom-gattway $(SWIFT_BUILD_FLAGS) || status=$$?; \
	  $(SWIFT) build --disable-build-manifest-caching --product gattway $(SWIFT_BUILD_FLAGS) >/dev/null || status=1; \
	  exit $$status
	@bin="$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))"; \
	  Tests/Examples/run.sh "$$bin/custom-gattway" "$$bin/gattway" $(PYTHON)

# Fuzzing (Tests/Fuzz; docs/operations.md, "Untrusted input"): gattway-fuzz built with libFuzzer
# (coverage-guided) and AddressSanitizer (the unsafe-pointer code: file I/O, libcrypto calls; about
# 3x slower, one combined -sanitize= flag or coverage is lost) in its own scratch path, so it never
# disturbs the ordinary build; the toolchain's lld links it, gold cannot. `make fuzz` runs every
# target (or TARGETS="json config") for FUZZ_SECONDS each, keeping the corpus in
# .build/fuzz-corpus/NAME; crashes land in Tests/Fixtures/fuzz/NAME/ to become fixtures once fixed.
# `make test-fuzz` is the bounded, seeded lane of `make test` (about a minute after the build); it
# fails on any crash and names the input. scripts/fuzz.sh prints executions, execs/s, corpus, crashes.
FUZZ_BUILD = -c release --scratch-path .build/fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld
FUZZ_BINARY = $$($(SWIFT) build $(FUZZ_BUILD) --show-bin-path)/gattway-fuzz
FUZZ_SECONDS ?= 120
fuzz: deps fuzz-binary
	FUZZ_SECONDS=$(FUZZ_SECONDS) TARGETS="$(TARGETS)" scripts/fuzz.sh fuzz "$(FUZZ_BINARY)"

fuzz-binary:
	$(SWIFT) build $(FUZZ_BUILD) --product gattway-fuzz
test-fuzz: deps fuzz-binary
	TARGETS="$(TARGETS)" scripts/fuzz.sh test "$(FUZZ_BINARY)"

# bleak (PyPI, pinned, a test instrument only) against `gattway simulate --scenario demo`
# on a private dbus-daemon: scan with a service filter, connect, services, read, write with and
# without response, notifications, disconnect; then bleak as the central on hci0 against `gattway
# run` in the peripheral role on hci1 (linked simulated adapters, its own mosquitto): read, MQTT →
# notification, writes → MQTT. Run twice: with the oldest bleak gattway promises (BLEAK_VERSION,
# in .venv, which test-bluez shares) and with the newest on PyPI (BLEAK_NEWEST_VERSION, in
# .venv-bleak-newest); each virtualenv made when missing, bleak installed again when its version is
# not the pinned one. Works with a pyenv shim or Debian's /usr/bin/python3.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
BLEAK_VERSION := 3.0.1
BLEAK_NEWEST_VERSION := 3.1.0
test-conformance: deps venv-bleak venv-bleak-newest
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	Tests/Conformance/run.sh "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway" .venv/bin/python
	Tests/Conformance/run.sh "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway" .venv-bleak-newest/bin/python

# $(call bleak_venv,DIR,VERSION): the virtualenv DIR with bleak VERSION from PyPI, made when
# missing, bleak installed again only when the installed version is another.
define bleak_venv
	@test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	@$(1)/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("bleak") != "$(2)")' 2>/dev/null \
	  || $(1)/bin/pip install -q bleak==$(2)
endef

# $(call pinned_venv,DIR,REQUIREMENTS): the virtualenv DIR with the pinned test instruments of
# REQUIREMENTS, made when missing and installed again only when the file changed (a copy is kept
# in DIR to compare).
define pinned_venv
	@test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	@cmp -s $(2) $(1)/requirements.txt \
	  || { $(1)/bin/pip install -q -r $(2) && cp $(2) $(1)/requirements.txt; }
endef

# The test instruments' virtualenvs, one target each (used by the lanes and by test-prepare).
venv-bleak:
	$(call bleak_venv,.venv,$(BLEAK_VERSION))
venv-bleak-newest:
	$(call bleak_venv,.venv-bleak-newest,$(BLEAK_NEWEST_VERSION))
venv-oracles:
	$(call pinned_venv,.venv-oracles,Tests/Oracles/requirements.txt)
venv-esphome:
	$(call pinned_venv,.venv-esphome,Tests/ESPHome/requirements.txt)
venv-esphome-ha2025.4:
	$(call pinned_venv,.venv-esphome-ha2025.4,Tests/ESPHome/requirements-ha2025.4.txt)
# Home Assistant's needs a Python 3.13 (Tests/HomeAssistant/python.sh); without one, nothing here
# (test-homeassistant says SKIPPED or fails).
venv-homeassistant:
	@python="$$(Tests/HomeAssistant/python.sh $(HA_PYTHON))"; \
	  [ -z "$$python" ] || Tests/HomeAssistant/venv.sh "$$python" .venv-homeassistant

# The oracle lane (Tests/Oracles, docs/parsers.md "Oracle lane"): per parser family, seeded random
# valid advertisements decoded by `gattway decode` and by the family's maintained open-source
# parser (PyPI, pinned in Tests/Oracles/requirements.txt, in .venv-oracles created only when
# missing; test instruments only), compared by value: at least 99 % agreement over ORACLE_FRAMES
# frames per family. A report of every disagreement goes to .build/oracle-report.txt.
ORACLE_FRAMES ?= 300
test-oracles: deps venv-oracles
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	.venv-oracles/bin/python Tests/Oracles/oracle_lane.py \
	  "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway" \
	  --frames $(ORACLE_FRAMES) --report .build/oracle-report.txt

# The Home Assistant Bluetooth proxy (docs/ha-bluetooth-proxy.md) with the client Home Assistant
# uses: aioesphomeapi and bleak-esphome (PyPI, pinned with their dependencies in Tests/ESPHome/requirements.txt, in
# .venv-esphome created only when missing; a test instrument only) against `gattway run` with
# bluetooth_proxy on loopback, the BlueZ simulator on a private bus and a mosquitto of its own:
# Noise key right and wrong, DeviceInfo, two clients receiving the simulator's BTHome and Ruuvi
# advertisements raw with BlueZ's bytes, connections through the proxy (connect, services, read,
# write, notify, slots) with aioesphomeapi's GATT calls and with bleak-esphome over habluetooth,
# the mDNS announcement to a stand-in for Avahi (collisions, a failure, a restart), MQTT
# unchanged, exit 78 without a key. Run twice: with the newest clients (requirements.txt) and
# with the oldest gattway promises, those Home Assistant 2025.4 pins (aioesphomeapi 29.9.0,
# bleak-esphome 2.12.0, habluetooth 3.37.0: requirements-ha2025.4.txt, in .venv-esphome-ha2025.4).
# About 70 s.
test-esphome: deps venv-esphome venv-esphome-ha2025.4
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	Tests/ESPHome/run.sh "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway" .venv-esphome/bin/python
	Tests/ESPHome/run.sh "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway" .venv-esphome-ha2025.4/bin/python

# Home Assistant itself adopts the Bluetooth proxy (issue 28; docs/ha-bluetooth-proxy.md, "Tested
# with Home Assistant"): Home Assistant Core 2025.4.4 (PyPI, with its own package_constraints.txt
# and the requirements of the integrations the lane loads, pinned in
# Tests/HomeAssistant/requirements.txt, in .venv-homeassistant made with Python 3.13 and installed
# again only when those files change; test instruments only) runs with --skip-pip, no network (a
# network namespace with only loopback: unshare, as root or in a user namespace) and no Bluetooth adapter of its
# own, beside `gattway run` with bluetooth_proxy on the BlueZ simulator and a mosquitto of its own.
# Driven over its HTTP and websocket APIs as a user: onboarding, the ESPHome config flow (host,
# port, encryption key), the proxy registered as a connectable scanner, the BTHome sensor's
# discovery confirmed and its states equal to gattway's MQTT readings of the same packet ids, a
# read through the proxy by a custom integration (bleak → bleak-esphome → aioesphomeapi 29.9.0),
# gattway's log and bridge/health; with HA's MQTT integration added and HA restarted, an mqtt_room
# sensor for the simulator's rotating phone from gattway's ESPresense messages. HA_PYTHON names a
# Python 3.13 (found on PATH or in pyenv when unset); without one the lane says SKIPPED, or fails
# under CI=true. About 75 s; the first install of the venv takes a few minutes more.
HA_PYTHON ?=
test-homeassistant: deps
	@scripts/install-deps.sh libturbojpeg0 iproute2 util-linux
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	@python="$$(Tests/HomeAssistant/python.sh $(HA_PYTHON))"; \
	  if [ -z "$$python" ]; then Tests/HomeAssistant/no-python.sh; exit $$?; fi; \
	  $(MAKE) --no-print-directory venv-homeassistant \
	  && Tests/HomeAssistant/run.sh "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway" .venv-homeassistant/bin/python

# The real-BlueZ lane (Tests/RealBlueZ/README.md): a qemu VM (software emulation, no network
# device) with Debian's kernel, btvirt and the real bluetoothd 5.66; the VM files are built once
# into .build/realbluez. The test peripheral, the CLI, the CentralManager scenario, gattway run,
# the differential check of the simulator against real bluetoothd, the Home Assistant Bluetooth
# proxy of `gattway run` with aioesphomeapi and bleak-esphome (in .venv-esphome, as for
# test-esphome) as its clients, `gattway serve` on hci1 with the CLI and bleak (in .venv, as for
# test-conformance) as centrals, and `gattway run` in the peripheral role and with role both.
# About 11 minutes (the VM about 660 s on 2 cores).
test-bluez: deps venv-bleak venv-esphome
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	$(SWIFT) build --product realbluez-central $(SWIFT_BUILD_FLAGS)
	RBZ_BLEAK_PYTHON="$(CURDIR)/.venv/bin/python" RBZ_ESPHOME_PYTHON="$(CURDIR)/.venv-esphome/bin/python" \
	  Tests/RealBlueZ/test-bluez.sh "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))"

# The broker cluster fleet mode is designed for (Tests/Fleet/README.md; docs/fleet.md, "Broker
# clusters: what the design relies on"): 3 nodes of Debian's rabbitmq-server with the MQTT plugin
# and mosquitto edge brokers bridged to them, all on 127.0.0.1 under FLEET_DIR, started by
# Tests/Fleet/cluster.sh and always stopped, even on failure or Ctrl-C; Tests/Fleet/cluster-facts.py
# checks each fact the design relies on (one node is SIGKILLed and restarted). A system
# rabbitmq-server, if the package started one, is left alone: no port is shared. Not part of
# `make test`. About 2 minutes.
FLEET_PACKAGES := rabbitmq-server mosquitto mosquitto-clients python3 coreutils
FLEET_DIR ?= .build/fleet-cluster
test-fleet-cluster:
	@scripts/install-deps.sh $(FLEET_PACKAGES)
	@dir="$(FLEET_DIR)"; \
	  if [ -f "$$dir/cluster.env" ]; then Tests/Fleet/cluster.sh stop "$$dir" || true; fi; \
	  rm -rf "$$dir" && mkdir -p "$$dir" || exit 1; \
	  trap 'Tests/Fleet/cluster.sh stop "$$dir"' EXIT; trap 'exit 130' INT TERM; \
	  Tests/Fleet/cluster.sh start "$$dir" && Tests/Fleet/cluster-facts.py "$$dir" \
	    && Tests/Fleet/cluster.sh status "$$dir"

# Fleet mode on the real cluster (docs/fleet.md): a 3-node RabbitMQ cluster, three `gattway run`
# with their own simulated radios, a node killed, the owning gateway killed
# (Tests/Fleet/fleet-gateways.py), then the same with a mosquitto edge broker per gateway bridged
# to the cluster (--edges); about 2 minutes, a third of it the cluster's start.
# The web page in a real browser (issue 32, item 5; docs/web-page.md, "Tested in a real browser"):
# `gattway demo` (the simulator's demo world, mosquitto, `gattway run` with the page behind a token)
# driven by two engines, the same checks in each (Tests/Web/page_test.py, standard library only):
# Debian's headless chromium over its DevTools protocol (Tests/Web/cdp_browser.py), then Debian's
# firefox-esr over Marionette (Tests/Web/marionette_browser.py), each with a demo of its own. First
# a syntax check that webpage/ uses nothing newer than the level docs/web-page.md states
# (Tests/Web/web_level_check.py). The login, the devices and their values changing without a
# reload, a chart, the radio view's explanations and rule. Chromium's screenshots go to
# WEB_SCREENSHOTS (`make test-web WEB_SCREENSHOTS=docs` renews the ones the README shows),
# Firefox's to .build/test-web/firefox-*.png. About a minute.
WEB_PACKAGES := chromium firefox-esr mosquitto dbus-daemon python3
WEB_SCREENSHOTS ?= .build/test-web
test-web:
	@scripts/install-deps.sh $(WEB_PACKAGES)
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	$(PYTHON) Tests/Web/web_level_check.py webpage
	@chromium --version 2>/dev/null; firefox-esr --version 2>/dev/null
	@gattway="$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway"; status=0; \
	  $(PYTHON) Tests/Web/page_test.py "$$gattway" --browser chromium --screenshots $(WEB_SCREENSHOTS) || status=1; \
	  $(PYTHON) Tests/Web/page_test.py "$$gattway" --browser firefox --screenshots .build/test-web || status=1; \
	  exit $$status

test-fleet:
	@scripts/install-deps.sh $(FLEET_PACKAGES)
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	@dir="$(FLEET_DIR)"; bin="$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))"; \
	  if [ -f "$$dir/cluster.env" ]; then Tests/Fleet/cluster.sh stop "$$dir" || true; fi; \
	  rm -rf "$$dir" && mkdir -p "$$dir" || exit 1; \
	  trap 'Tests/Fleet/cluster.sh stop "$$dir"' EXIT; trap 'exit 130' INT TERM; \
	  Tests/Fleet/cluster.sh start "$$dir" && Tests/Fleet/fleet-gateways.py "$$dir" "$$bin/gattway" \
	    && Tests/Fleet/cluster.sh restart "$$dir" 1 && Tests/Fleet/fleet-gateways.py --edges "$$dir" "$$bin/gattway"

# One suite: make test-one SUITE=MQTTTests (a swift test --filter expression).
test-one: deps
	$(SWIFT) test $(SWIFT_BUILD_FLAGS) --filter '$(SUITE)'

# The house rules of every file, part of `make test`; any finding fails. swift-format's rules
# (.swift-format) over every Swift file (`swift format format -i -r --configuration .swift-format
# Sources Tests bench` fixes most); shellcheck (Debian's) over every shell script; ruff (PyPI,
# pinned in scripts/lint-requirements.txt, in .venv-lint, installed again only when that file
# changes) with the rules of ruff.toml over every Python file. A finding that is meant carries a
# `# shellcheck disable=SCnnnn` or `# noqa: RULE` with the reason. The package's maintainer scripts
# (deploy/debian) are shell scripts too. The web page's files are
# served from Sources/GatewayRuntime/Web/WebPageAssets.swift, which scripts/web-assets.py makes
# from webpage/: the lint fails when it was not run after a change there.
LINT_PACKAGES := shellcheck python3 python3-venv
SHELL_SCRIPTS = $(shell find . \( -name .git -o -name .build -o -name '.venv*' -o -name .realbluez-vm \) -prune \
                  -o -type f \( -name '*.sh' -o -path ./.ci/run \
                  -o -path ./deploy/debian/postinst -o -path ./deploy/debian/prerm -o -path ./deploy/debian/postrm \) -print | sort)
lint:
	@scripts/install-deps.sh $(LINT_PACKAGES)
	$(call pinned_venv,.venv-lint,scripts/lint-requirements.txt)
	$(SWIFT) format lint --strict --recursive --configuration .swift-format Sources Tests bench Examples
	shellcheck $(SHELL_SCRIPTS)
	.venv-lint/bin/ruff check --quiet .
	$(PYTHON) scripts/web-assets.py --check

# Benchmarks (never part of `make test`): prints a table and writes bench/results.json
# (BENCHMARKS.md). The peer, Theengs Gateway, comes from PyPI into .venv-bench, created only
# when missing, with bleak pinned to BLEAK_VERSION, so that the peer's figures do not move with
# bleak's releases. (One run with bleak 3.1.0 once saw Theengs publish nothing; it was not
# reproduced — the conformance lane runs 3.1.0 too, scanning as Theengs does.) `make bench
# SUITES=gateway` runs one suite.
# gattway is built as deploy/install.sh builds it ($(RELEASE_BUILD)), so the measured memory is
# what a user runs; `BENCH_PHASES=notification,memory` runs only some phases
# of the gateway suite. `SUITES=realistic` runs only the idle figures and the realistic rates
# (also a phase of gateway, `BENCH_PHASES=realistic`); `BENCH_GATTWAY_BASELINE=PATH` measures
# another gattway binary there too (before/after in one run). strace counts system calls.
# `SUITES=radio` (also part of the full run) boots the real-BlueZ VM once (Tests/RealBlueZ, built
# on first use) and measures both advertisement paths, bluetooth.radio dbus and mgmt (active, then
# mgmt passive too), at 100 and 1,000 reports/s from the virtual radio: delivery, CPU per report
# of gattway, bluetoothd and dbus-daemon, report-to-MQTT latency (about 9 minutes;
# BENCH_RADIO_RATES, BENCH_RADIO_SECONDS). `SUITES=bulk` (also part of the full run): 100 KiB written
# with and without response to a simulated device whose link drains at a real rate, by bleak on
# BlueZ (.venv, as the conformance lane) and by bleak-esphome through gattway's proxy
# (.venv-esphome, as the ESPHome lane): throughput, gattway's RSS, and the advertisements' latency
# to a second client meanwhile (about 2 minutes). `SUITES=web` (also part of the full run): what the
# open web page costs, in windows of one gattway with the page closed and open (about 2 minutes);
# `SUITES=web-instructions` (also part of the full run, below): the same counted in instructions.
THEENGS_VERSION := 1.8.0
BENCH_BUILD = $(RELEASE_BUILD)
bench: deps venv-bleak venv-esphome
	@scripts/install-deps.sh strace
	$(SWIFT) build $(BENCH_BUILD) --product gattway $(SWIFT_BUILD_FLAGS)
	$(SWIFT) build $(BENCH_BUILD) --product gattway-bench $(SWIFT_BUILD_FLAGS)
	@test -x .venv-bench/bin/python || $(PYTHON) -m venv .venv-bench
	@.venv-bench/bin/python -c 'import TheengsGateway, importlib.metadata as m; assert m.version("bleak") == "$(BLEAK_VERSION)"' 2>/dev/null || .venv-bench/bin/pip install -q TheengsGateway==$(THEENGS_VERSION) bleak==$(BLEAK_VERSION)
	@if [ -z "$(SUITES)" ] || [ -n "$(filter-out fleet-cluster web-instructions,$(SUITES))" ]; then \
	  echo "gattway-bench run $(filter-out fleet-cluster web-instructions,$(SUITES))"; \
	  BENCH_THEENGS_PYTHON=$(CURDIR)/.venv-bench/bin/python $$($(SWIFT) build $(BENCH_BUILD) --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway-bench run $(filter-out fleet-cluster web-instructions,$(SUITES)); fi
	@if [ -z "$(SUITES)" ] || echo " $(SUITES) " | grep -q ' web-instructions '; then $(MAKE) --no-print-directory bench-web-instructions; fi
	@if [ -z "$(SUITES)" ] || echo " $(SUITES) " | grep -q ' fleet-cluster '; then $(MAKE) --no-print-directory bench-fleet; fi

# The open web page's cost in instructions (issue 32, item 7; part of `make bench`, alone with
# `make bench-web-instructions` or `SUITES=web-instructions`): the release gattway under
# callgrind on both advertisement paths, nobody looking, the page on its device list and on the
# radio view (the same workload as suite `web`: 50 ATC1441 at random phases, report_batch 100ms,
# /metrics every 5 s), scripts/callgrind-per-report.py; prints each page's cost at 100 and 1,000
# adv/s over the figure with nobody looking (BENCHMARKS.md, "The web page's cost"). CPU time
# (suite `web`) cannot resolve a few per cent on a shared machine; instructions can. About 8 minutes.
bench-web-instructions: deps
	@scripts/install-deps.sh valgrind
	$(SWIFT) build $(BENCH_BUILD) --product gattway $(SWIFT_BUILD_FLAGS)
	RADIO="mgmt dbus" RATE=200 PAGE="closed devices radio" REPORT_BATCH=100ms SECONDS=20 WARMUP=10 \
	  $(PYTHON) scripts/callgrind-per-report.py "$$($(SWIFT) build $(BENCH_BUILD) --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway"

# Fleet mode at scale on the real cluster (BENCHMARKS.md; part of `make bench`, alone with
# `make bench-fleet` or `SUITES=fleet-cluster`): 10 release `gattway run` and 100 sensors
# (FLEET_GATEWAYS, FLEET_DEVICES, FLEET_MINUTES) on a 3-node RabbitMQ cluster
# (Tests/Fleet/fleet-scale.py): readings published twice, ownership changes, the fleet's traffic
# and the CPU per gateway. About 6 minutes.
FLEET_GATEWAYS ?= 10
FLEET_DEVICES ?= 100
FLEET_MINUTES ?= 5
bench-fleet:
	@scripts/install-deps.sh $(FLEET_PACKAGES)
	$(SWIFT) build $(BENCH_BUILD) --product gattway $(SWIFT_BUILD_FLAGS)
	@dir="$(FLEET_DIR)"; bin="$$($(SWIFT) build $(BENCH_BUILD) --show-bin-path $(SWIFT_BUILD_FLAGS))"; \
	  if [ -f "$$dir/cluster.env" ]; then Tests/Fleet/cluster.sh stop "$$dir" || true; fi; \
	  rm -rf "$$dir" && mkdir -p "$$dir" || exit 1; \
	  trap 'Tests/Fleet/cluster.sh stop "$$dir"' EXIT; trap 'exit 130' INT TERM; \
	  Tests/Fleet/cluster.sh start "$$dir" && Tests/Fleet/fleet-scale.py "$$dir" "$$bin/gattway" \
	    --gateways $(FLEET_GATEWAYS) --devices $(FLEET_DEVICES) --minutes $(FLEET_MINUTES)

# The soak (never part of `make test`; RELIABILITY.md): MINUTES (30) of gattway run, built as for
# `make bench`, on the simulator — the demo's connected devices, 200 rotating ATC1441 advertisers at
# 500 adv/s — with a fault every 20 s in turn (peer disconnect, bluetoothd restart without
# InterfacesRemoved, broker SIGKILL + restart, adapter power cycle). Prints alive, RSS every 10 s
# and its growth after a 5-minute warm-up, the connected sensors' readings lost (QoS 1), recovery
# per fault kind and CPU per message; writes bench/soak-results.json (SOAK_RESULTS=FILE);
# exits 1 when a target is missed. Loopback and private daemons only; it ends by itself.
MINUTES ?= 30
soak: deps
	$(SWIFT) build $(BENCH_BUILD) --product gattway $(SWIFT_BUILD_FLAGS)
	$(SWIFT) build $(BENCH_BUILD) --product gattway-bench $(SWIFT_BUILD_FLAGS)
	$$($(SWIFT) build $(BENCH_BUILD) --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway-bench soak $(MINUTES)

# The whole gateway on the simulator (no Bluetooth hardware, no root): a private dbus-daemon, the
# demo scenario, mosquitto on a free loopback port and gattway run; prints decoded readings and a
# command round trip, then stops everything it started after DEMO_DURATION (or on Ctrl-C).
DEMO_DURATION ?= 20s
demo: deps
	$(SWIFT) build --product gattway $(SWIFT_BUILD_FLAGS)
	$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))/gattway demo --duration $(DEMO_DURATION)

clean:
	rm -rf .build .venv .venv-bench .venv-bleak-newest .venv-esphome .venv-esphome-ha2025.4 .venv-homeassistant .venv-lint .venv-oracles bench/results.json
