# Set-up and test entry points. `make run` and `make test` are the README's two quick-start commands.
SHELL := /bin/bash
# What building, running and testing need (busctl comes with systemd, gdbus with libglib2.0-bin;
# nginx-light with ssl and http2 and openssl for a test CA: the HTTPS tests; libxml2-dev for
# Foundation's XMLParser, which reads Metalink documents; bubblewrap and xdg-dbus-proxy: a Flatpak app as
# Flatpak runs one, for the sandboxed-app tests; python3-pip installs the tus server of the resumable-upload
# tests, PyPI's resumable-upload, into .build/python; python3-tuspy is the tus client they cross-check with;
# lighttpd with mod_webdav and apache2-bin's mod_dav: WebDAV servers no one here wrote, for uploads; attr:
# getfattr, which reads the origin attributes of finished files as people do; python3-fusepy: a FUSE file
# whose reads never answer, as a hung network mount does; avahi-daemon and avahi-utils: the local network's
# adverts of shared files, between two network namespaces; apt-utils: apt-ftparchive, a repository for
# apt itself through the apt method).
DEBIAN_PACKAGES := libdbus-1-dev libglib2.0-dev libglib2.0-bin libsqlite3-dev libxml2-dev pkg-config dbus python3-dbus python3-gi python3-dbusmock python3-hypothesis \
	systemd curl ca-certificates procps passwd nginx-light openssl tinyproxy microsocks iproute2 \
	bubblewrap xdg-dbus-proxy python3-fusepy python3-pip python3-tuspy lighttpd lighttpd-mod-webdav apache2-bin attr \
	nghttp2-server avahi-daemon avahi-utils apt-utils
# Building the .deb.
DEB_PACKAGES := dpkg-dev debhelper lintian fakeroot
# Reference tools of the benchmarks only.
BENCH_PACKAGES := nginx-light curl wget aria2 time python3-dbus python3-gi iproute2 iputils-ping
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
STATE_DIR ?= $(HOME)/.local/state/org.example.Downloads

.PHONY: deps build run test fuzz lint format docs deb test-install test-systemd test-apt bench bench-dbus bench-engine

TUS_SERVER := resumable-upload==0.3.0

deps:
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(DEBIAN_PACKAGES)
	test -f .build/python/resumable_upload/__init__.py || \
	  /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location --target .build/python $(TUS_SERVER)

build:
	swift build -c release --product downloadsd
	swift build -c release --product downloads-file-helper
	swift build -c release --product downloadsctl
	swift build -c release --product downloads-monitor
	swift build -c release --product downloads-agent

# Installs what is needed, builds, and runs the service on the session bus (a private one from
# dbus-run-session when this machine has none), in the foreground: it never exits when idle, since
# nothing would start it again from the build tree.
run: deps build
	@if [ -n "$$DBUS_SESSION_BUS_ADDRESS" ]; then \
		exec .build/release/downloadsd --session --exit-idle-time 0; \
	else \
		echo "No session bus: starting a private one with dbus-run-session."; \
		install -d -m 0700 "$(STATE_DIR)"; \
		exec dbus-run-session -- sh -c 'echo "export DBUS_SESSION_BUS_ADDRESS=$$DBUS_SESSION_BUS_ADDRESS" > "$(STATE_DIR)/bus-address"; \
			echo "In another shell: . $(STATE_DIR)/bus-address   (then busctl --user / gdbus --session reach it)"; \
			exec .build/release/downloadsd --session --exit-idle-time 0'; \
	fi

# Installs what the tests need and runs the whole suite (private buses and servers on 127.0.0.1).
# A failure is repeated at the end of the output, where a CI log's tail shows it.
test: deps
	swift build --build-tests
	bash -c 'set -o pipefail; swift test --skip-build --disable-swift-testing 2>&1 | tee .build/test.log' \
	  || { echo "== the failures again (the whole log: .build/test.log):"; grep -E ": error: |' failed \(" .build/test.log | tail -60; exit 1; }

# A longer fuzzing run than the suite's (python3-hypothesis as user nobody, on the system bus).
fuzz: deps
	swift build --build-tests
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-20000} swift test --skip-build --disable-swift-testing --filter FuzzTests

# The toolchain's swift-format with .swift-format (4 spaces, 120 columns, formatting rules only):
# `make lint` fails on any file it would change (seconds; .ci/run runs it first), `make format`
# changes them.
SWIFT_FORMAT ?= $(shell command -v swift-format || echo /opt/swift/usr/bin/swift-format)
lint:
	$(SWIFT_FORMAT) lint --strict --recursive --parallel Sources Tests Benchmarks

format:
	$(SWIFT_FORMAT) format --in-place --recursive --parallel Sources Tests Benchmarks

# Man pages (from the argument parsers, swift-argument-parser's generate-manual plugin) and shell
# completions of downloadsctl, into .build/docs (the package installs them from there).
DOCS := .build/docs
docs:
	mkdir -p $(DOCS)/man $(DOCS)/completions
	swift package --allow-writing-to-directory $(DOCS)/man generate-manual --output-directory $(DOCS)/man --date 2026-11-22
	swift build -c release --product downloadsctl
	.build/release/downloadsctl --generate-completion-script bash > $(DOCS)/completions/downloadsctl.bash
	.build/release/downloadsctl --generate-completion-script zsh > $(DOCS)/completions/_downloadsctl
	.build/release/downloadsctl --generate-completion-script fish > $(DOCS)/completions/downloadsctl.fish

# dist/org-example-downloads_<version>_<arch>.deb (static Swift stdlib, man pages, completions),
# checked with lintian.
deb: deps
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES)
	packaging/build-deb

# Installs the .deb into a clean Debian 12 root (debootstrap) and uses it as a user (slow; root).
test-install:
	$(SUDO) packaging/test-install

# Boots a Debian 12 root with the .deb under systemd (systemd-nspawn): both units activated by a
# call, exiting when idle with a clean stop, activated again (slow; root).
test-systemd:
	$(SUDO) packaging/test-systemd

# apt itself through the .deb's method under systemd (the same rig): update, a second update
# fetching no index, install, a 64 MiB package cut by Ctrl-C and finished from its bytes, wrong
# bytes refused (slow; root).
test-apt:
	$(SUDO) packaging/test-apt

# The service against curl, wget, aria2c and dd, printed and written to Benchmarks/RESULTS.md
# (about 25 minutes; BENCH_ARGS="--runs 3 --sections single" for a part).
bench: deps
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(BENCH_PACKAGES)
	swift build -c release --product downloadsd
	swift build -c release --product downloadsctl
	swift build -c release --product downloads-file-helper
	swift build -c release --product upload-servers
	Benchmarks/bench.py $(BENCH_ARGS)

bench-dbus:
	swift build -c release --product dbus-bench
	.build/release/dbus-bench

bench-engine: deps
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(BENCH_PACKAGES)
	swift build -c release --product engine-bench
	Benchmarks/engine-bench.sh
