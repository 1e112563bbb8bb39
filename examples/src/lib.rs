//! Runnable examples for wasmctrl. Each binary in `src/bin/` is compiled by
//! `make test` and run by it, so they never rot:
//!
//! - `offline_summary`: the GPU-summary guest over a few pods, no cluster.
