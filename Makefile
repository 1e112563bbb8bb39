# The two commands README.md shows a newcomer:
#   make demo   - the host with the GPU-summary guest against the embedded API server
#   make test   - every check CI runs (fmt, clippy, rustdoc, guest builds + sizes,
#                 the book, all tests, the guests' native unit tests included)

CARGO ?= cargo
# Guests land in target/wasm32-wasip2/guest/<crate_name>.wasm.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
GUEST_DIR := $(TARGET_DIR)/wasm32-wasip2/guest
GUEST_WASM := $(GUEST_DIR)/guest_gpu_summary.wasm
QUOTA_WASM := $(GUEST_DIR)/guest_gpu_quota.wasm
APP_WASM := $(GUEST_DIR)/guest_app.wasm
NAMESPACES_WASM := $(GUEST_DIR)/guest_namespaces.wasm
GUEST_MAX_BYTES := 262144

.PHONY: all setup toolchains guest guests-js test-js guest-py probes test lint product book book-regenerate fmt demo soak clean

all: test

setup:
	rustup target add wasm32-wasip2

# The pinned toolchains for guests in other languages (toolchains/README.md).
# `make test` runs it first; npm reinstalls only when the lockfile changed.
JS_TOOLCHAIN := toolchains/js/node_modules/.package-lock.json
toolchains: $(JS_TOOLCHAIN)
	python3 -m pip install --quiet -r toolchains/python/requirements.txt
$(JS_TOOLCHAIN): toolchains/js/package-lock.json
	npm ci --prefix toolchains/js --no-audit --no-fund

# The guests (size-checked: they ship in ConfigMaps): the GPU summary,
# examples/guest-gpu-quota, examples/guest-app and
# examples/guest-namespaces; and the test guests
# tests/guests/guest-println (std printing and panics, for the tests),
# tests/guests/guest-related (reports what each key's snapshot held) and
# tests/guests/guest-tiers (an aggregate namespace provisioner).
guest: setup
	$(CARGO) build -p guest-gpu-summary -p guest-gpu-quota -p guest-app -p guest-namespaces -p guest-println -p guest-related -p guest-tiers --target wasm32-wasip2 --profile guest
	@for wasm in $(GUEST_WASM) $(QUOTA_WASM) $(APP_WASM) $(NAMESPACES_WASM); do \
	  size=$$(stat -c %s $$wasm); \
	  echo "$$(basename $$wasm): $$size bytes (limit $(GUEST_MAX_BYTES))"; \
	  test $$size -le $(GUEST_MAX_BYTES) || { echo "$$wasm too large"; exit 1; }; \
	done

# TypeScript (toolchains/js): the SDK (wit/typescript) and
# examples/guest-app-ts compiled by tsc and, for the components (the App
# guest, and the SDK's printing probe for the host's tests), bundled by
# rolldown and built by componentize-qjs (QuickJS, the non-async runtime,
# WASI from the host's governed surface: docs/src/guest/typescript.md says why)
# into $(JS_GUEST_DIR), once per run; the integration tests load it from
# there. `test-js` runs both packages' node --test suites.
JS_BIN := $(CURDIR)/toolchains/js/node_modules/.bin
JS_GUEST_DIR := $(TARGET_DIR)/guests-js
APP_TS_WASM := $(JS_GUEST_DIR)/guest_app_ts.wasm
guests-js:
	cd wit/typescript && PATH="$(JS_BIN):$$PATH" tsc -p .
	cd examples/guest-app-ts && npm ci --no-audit --no-fund --silent && PATH="$(JS_BIN):$$PATH" tsc -p .
	mkdir -p $(JS_GUEST_DIR)
	$(JS_BIN)/rolldown examples/guest-app-ts/dist/src/component.js --format esm \
	  --external 'wasmctrl:controller/log@0.3.0' --file $(JS_GUEST_DIR)/guest_app_ts.js
	$(JS_BIN)/componentize-qjs --wit wit/controller.wit --world controller --sync \
	  --js $(JS_GUEST_DIR)/guest_app_ts.js -o $(APP_TS_WASM)
	@echo "$$(basename $(APP_TS_WASM)): $$(stat -c %s $(APP_TS_WASM)) bytes"
	$(JS_BIN)/rolldown wit/typescript/dist/probe/println.js --format esm \
	  --external 'wasmctrl:controller/log@0.3.0' --file $(JS_GUEST_DIR)/probe_println_ts.js
	$(JS_BIN)/componentize-qjs --wit wit/controller.wit --world controller --sync \
	  --js $(JS_GUEST_DIR)/probe_println_ts.js -o $(JS_GUEST_DIR)/probe_println_ts.wasm

test-js: guests-js
	node --test wit/typescript/dist/test/ examples/guest-app-ts/dist/test/

# The Python guest (examples/guest-app-py, with the SDK in wit/python),
# built once by componentize-py's default build into $(PY_GUESTS) (the
# integration tests load it from there), then the SDK's and the guest's
# pytest on plain CPython (under CI a missing componentize-py fails them).
PY_GUESTS := $(TARGET_DIR)/guests-py
PY_APP_WASM := $(PY_GUESTS)/guest_app.wasm
PY_SDK := wit/python/src
PYTEST := PYTHONPATH=$(PY_SDK) python3 -m pytest -q -p no:cacheprovider
guest-py: $(PY_APP_WASM)
	$(PYTEST) wit/python/tests
	$(PYTEST) examples/guest-app-py/tests

$(PY_APP_WASM): wit/controller.wit $(wildcard $(PY_SDK)/wasmctrl/*.py examples/guest-app-py/*.py)
	mkdir -p $(PY_GUESTS)
	componentize-py -d wit -w controller componentize -p examples/guest-app-py -p $(PY_SDK) app -o $@

# The embedded API server is a development feature of the host
# (`dev-server`: the `demo` and `apiserver` subcommands); the tests and the
# demo turn it on, the product never has it.
DEV := --features wasmctrl/dev-server

# The API docs, warnings denied; the book links into them (docs/book/api).
RUSTDOC := RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps -p wasmctrl -p wasmctrl-apiserver $(DEV)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets $(DEV) -- -D warnings
	$(CARGO) clippy -p wasmctrl --all-targets -- -D warnings
	$(RUSTDOC)

# The book: docs/src built by mdbook (pinned; .ci/run installs it) into
# docs/book, with the API docs copied to docs/book/api. Its links, anchors,
# includes and Rust samples are checked by `cargo test -p wasmctrl-docs`
# (part of the workspace's tests); the pages generated from the code (flags,
# metrics) by the binary's tests, and `make book-regenerate` rewrites them.
# Without mdbook the build is skipped, saying so, except under CI.
MDBOOK ?= mdbook
MDBOOK_VERSION := 0.5.4
book:
	$(RUSTDOC)
	@if ! command -v $(MDBOOK) > /dev/null 2>&1; then \
	  if [ -n "$$CI" ]; then echo "error: mdbook is not on PATH (CI needs it: cargo install mdbook --version $(MDBOOK_VERSION) --locked)"; exit 1; fi; \
	  echo "SKIPPED: the book (mdbook is not on PATH: cargo install mdbook --version $(MDBOOK_VERSION) --locked)"; exit 0; \
	fi; \
	case "$$($(MDBOOK) --version)" in *" v$(MDBOOK_VERSION)") ;; \
	  *) echo "warning: $$($(MDBOOK) --version), not the pinned v$(MDBOOK_VERSION)"; [ -z "$$CI" ] || exit 1 ;; esac; \
	$(MDBOOK) build docs && rm -rf docs/book/api && cp -r $(TARGET_DIR)/doc docs/book/api && \
	echo "the book: docs/book/index.html"

book-regenerate:
	WASMCTRL_REGENERATE_BOOK=1 $(CARGO) test -p wasmctrl --bin wasmctrl $(DEV) book::

# The product binary, as the Dockerfile builds it: no embedded API server
# linked in (no symbol of wasmctrl_apiserver), and no dev subcommands.
product:
	$(CARGO) build -p wasmctrl --bin wasmctrl
	@n=$$(nm -C $(TARGET_DIR)/debug/wasmctrl | grep -c 'wasmctrl_apiserver::' || true); \
	  echo "product binary: $$n wasmctrl_apiserver symbols"; \
	  test "$$n" -eq 0 || { echo "the product binary links the embedded API server"; exit 1; }
	@! $(TARGET_DIR)/debug/wasmctrl demo --help > /dev/null 2>&1 || { echo "the product binary has the demo subcommand"; exit 1; }

# The workspace's tests include host/tests/scaffold.rs: a `wasmctrl new` crate
# tested, built and run offline outside the repository (its builds are kept
# in $(TARGET_DIR)/scaffold), and docs/tests/book.rs, the book's checks.
# Probe guests in Python and JavaScript (tests/guests/py-probe, js-probe),
# built with the pinned toolchains' default settings, once per change:
# the host's tests load them from target/guests-py and target/guests-js.
# js-probe-async.wasm keeps componentize-qjs's default async ABI (a guest
# the host refuses).
PY_PROBE := $(TARGET_DIR)/guests-py/py-probe.wasm
JS_PROBES := $(TARGET_DIR)/guests-js/js-probe.wasm $(TARGET_DIR)/guests-js/js-probe-async.wasm
JCO := toolchains/js/node_modules/.bin/jco
probes: $(PY_PROBE) $(JS_PROBES)
$(PY_PROBE): tests/guests/py-probe/app.py wit/controller.wit
	@mkdir -p $(@D)
	cd tests/guests/py-probe && componentize-py -d ../../../wit -w controller componentize app -o $(abspath $@)
$(TARGET_DIR)/guests-js/js-probe.wasm: tests/guests/js-probe/probe.js wit/controller.wit
	@mkdir -p $(@D)
	$(JCO) componentize $(abspath $<) -w $(abspath wit) -n controller --backend qjs --backend-qjs-disable-async -o $(abspath $@)
$(TARGET_DIR)/guests-js/js-probe-async.wasm: tests/guests/js-probe/probe.js wit/controller.wit
	@mkdir -p $(@D)
	$(JCO) componentize $(abspath $<) -w $(abspath wit) -n controller --backend qjs -o $(abspath $@)

test: toolchains guest test-js guest-py probes lint product book
	$(CARGO) test --workspace --all-targets $(DEV)
	$(CARGO) test --workspace --doc $(DEV)
	$(CARGO) run -q -p examples --bin offline_summary > /dev/null

demo: guest
	$(CARGO) run --release -p wasmctrl $(DEV) -- demo --duration 30

# Soak and chaos: churn, server faults and host SIGKILLs against the real
# binary for SOAK_MINUTES; prints a table per fault kind (latest figures in
# BENCHMARKS.md; each run's table in docs/src/internals/benchmarks-archive.md).
SOAK_MINUTES ?= 5
soak: guest
	$(CARGO) bench -p wasmctrl --bench soak -- --minutes $(SOAK_MINUTES)

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
