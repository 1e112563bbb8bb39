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

.PHONY: all setup guest test lint fmt demo soak clean

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

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test: guest lint
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc
	$(CARGO) run -q -p examples --bin offline_summary > /dev/null

demo: guest
	$(CARGO) run --release -p wasmctrl -- demo --duration 30

# Soak and chaos: churn, server faults and host SIGKILLs against the real
# binary for SOAK_MINUTES; prints a table per fault kind (see BENCHMARKS.md).
SOAK_MINUTES ?= 5
soak: guest
	$(CARGO) bench -p wasmctrl --bench soak -- --minutes $(SOAK_MINUTES)

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
