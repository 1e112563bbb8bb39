# The two commands README.md shows a newcomer:
#   make demo   - the host with the GPU-summary guest against the embedded API server
#   make test   - every check CI runs (fmt, clippy, guest builds + sizes, all tests,
#                 the guests' native unit tests included)

CARGO ?= cargo
# Guests land in target/wasm32-wasip2/guest/<crate_name>.wasm.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
GUEST_DIR := $(TARGET_DIR)/wasm32-wasip2/guest
GUEST_WASM := $(GUEST_DIR)/guest_gpu_summary.wasm
QUOTA_WASM := $(GUEST_DIR)/guest_gpu_quota.wasm
APP_WASM := $(GUEST_DIR)/guest_app.wasm
GUEST_MAX_BYTES := 262144

.PHONY: all setup guest test lint product fmt demo soak clean

all: test

setup:
	rustup target add wasm32-wasip2

# The guests (size-checked: they ship in ConfigMaps): the GPU summary,
# examples/guest-gpu-quota and examples/guest-app; and the test guests
# examples/guest-println (std printing and panics, for the tests) and
# examples/guest-related (reports what each key's snapshot held).
guest: setup
	$(CARGO) build -p guest-gpu-summary -p guest-gpu-quota -p guest-app -p guest-println -p guest-related --target wasm32-wasip2 --profile guest
	@for wasm in $(GUEST_WASM) $(QUOTA_WASM) $(APP_WASM); do \
	  size=$$(stat -c %s $$wasm); \
	  echo "$$(basename $$wasm): $$size bytes (limit $(GUEST_MAX_BYTES))"; \
	  test $$size -le $(GUEST_MAX_BYTES) || { echo "$$wasm too large"; exit 1; }; \
	done

# The embedded API server is a development feature of the host
# (`dev-server`: the `demo` and `apiserver` subcommands); the tests and the
# demo turn it on, the product never has it.
DEV := --features wasmctrl/dev-server

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets $(DEV) -- -D warnings
	$(CARGO) clippy -p wasmctrl --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps -p wasmctrl -p wasmctrl-apiserver $(DEV)

# The product binary, as the Dockerfile builds it: no embedded API server
# linked in (no symbol of wasmctrl_apiserver), and no dev subcommands.
product:
	$(CARGO) build -p wasmctrl --bin wasmctrl
	@n=$$(nm -C $(TARGET_DIR)/debug/wasmctrl | grep -c 'wasmctrl_apiserver::' || true); \
	  echo "product binary: $$n wasmctrl_apiserver symbols"; \
	  test "$$n" -eq 0 || { echo "the product binary links the embedded API server"; exit 1; }
	@! $(TARGET_DIR)/debug/wasmctrl demo --help > /dev/null 2>&1 || { echo "the product binary has the demo subcommand"; exit 1; }

# The workspace's tests include tests/scaffold.rs: a `wasmctrl new` crate
# tested, built and run offline outside the repository (its builds are kept
# in $(TARGET_DIR)/scaffold).
test: guest lint product
	$(CARGO) test --workspace --all-targets $(DEV)
	$(CARGO) test --workspace --doc $(DEV)
	$(CARGO) run -q -p examples --bin offline_summary > /dev/null

demo: guest
	$(CARGO) run --release -p wasmctrl $(DEV) -- demo --duration 30

# Soak and chaos: churn, server faults and host SIGKILLs against the real
# binary for SOAK_MINUTES; prints a table per fault kind (see BENCHMARKS.md).
SOAK_MINUTES ?= 5
soak: guest
	$(CARGO) bench -p wasmctrl --bench soak -- --minutes $(SOAK_MINUTES)

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
