# The two commands README.md shows a newcomer:
#   make demo   - the host with the GPU-summary guest against the embedded API server
#   make test   - every check CI runs (fmt, clippy, guest build + size, all tests)

CARGO ?= cargo
GUEST_WASM := target/wasm32-wasip2/guest/guest_gpu_summary.wasm
GUEST_MAX_BYTES := 262144

.PHONY: all setup guest test lint fmt demo clean

all: test

setup:
	rustup target add wasm32-wasip2

# The GPU-summary guest (size-checked: it ships in a ConfigMap) and the
# test guest examples/guest-println (std printing and panics, for the tests).
guest: setup
	$(CARGO) build -p guest-gpu-summary -p guest-println --target wasm32-wasip2 --profile guest
	@size=$$(stat -c %s $(GUEST_WASM)); \
	  echo "guest-gpu-summary.wasm: $$size bytes (limit $(GUEST_MAX_BYTES))"; \
	  test $$size -le $(GUEST_MAX_BYTES) || { echo "guest too large"; exit 1; }

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test: guest lint
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc
	$(CARGO) run -q -p examples --bin offline_summary > /dev/null

demo: guest
	$(CARGO) run --release -p wasmctrl -- demo --duration 30

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
