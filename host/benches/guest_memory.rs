//! What loading a guest costs the host's memory: each variant of the
//! engine configuration in a process of its own (VmHWM is per process),
//! the resident high-water mark and RSS after creating the engine, after
//! compiling the GPU-summary component (or deserialising its precompiled
//! artifact, as the disk cache does) and after instantiating it
//! (issue 46). `make guest` first.
//!
//! `cargo bench -p wasmctrl --bench guest_memory`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

const VARIANTS: &[&str] = &[
    "default",
    "precompiled",
    "pooling",
    "small-reservation",
    "no-guard",
];

/// (VmHWM, VmRSS) in KiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn guest() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("wasm32-wasip2/guest/guest_gpu_summary.wasm")
}

fn config(variant: &str) -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true).epoch_interruption(true);
    match variant {
        "pooling" => {
            let mut pool = PoolingAllocationConfig::default();
            pool.total_component_instances(16)
                .total_core_instances(16)
                .total_memories(16)
                .total_tables(16)
                .max_memory_size(512 << 20);
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        "small-reservation" => {
            c.memory_reservation(64 << 20);
        }
        "no-guard" => {
            c.memory_guard_size(0);
        }
        _ => {}
    }
    c
}

fn run(variant: &str) {
    let bytes = std::fs::read(guest()).expect("the GPU-summary guest: run `make guest`");
    let start = memory();
    let t = Instant::now();
    let engine = Engine::new(&config(variant)).unwrap();
    let engine_at = memory();
    let component = match variant {
        // The artifact the disk cache keeps, made by another process with
        // the same configuration, mapped as the cache does.
        "precompiled" => {
            let artifact = std::env::var_os("GUEST_MEMORY_ARTIFACT").unwrap();
            #[allow(unsafe_code)]
            // SAFETY: the parent process wrote it with an engine of the
            // same configuration, from the same bytes, just before.
            unsafe {
                Component::deserialize_file(&engine, artifact).unwrap()
            }
        }
        _ => Component::new(&engine, &bytes).unwrap(),
    };
    let load = t.elapsed();
    let loaded = memory();
    let mut linker: Linker<()> = Linker::new(&engine);
    linker.define_unknown_imports_as_traps(&component).unwrap();
    let pre = linker.instantiate_pre(&component).unwrap();
    let mut store = Store::new(&engine, ());
    store.set_epoch_deadline(1 << 40);
    let t = Instant::now();
    let _instance = pre.instantiate(&mut store).unwrap();
    let inst = t.elapsed();
    let instantiated = memory();
    println!(
        "{variant:>18}: VmHWM start {:>6} KiB, engine +{:>5}, loaded +{:>6} (RSS +{:>6}), instantiated +{:>5}; load {:>7.1} ms, instantiate {:>6.1} µs",
        start.0,
        engine_at.0 - start.0,
        loaded.0 - start.0,
        loaded.1.saturating_sub(start.1),
        instantiated.0 - loaded.0,
        load.as_secs_f64() * 1e3,
        inst.as_secs_f64() * 1e6,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--variant") {
        run(&args[i + 1]);
        return;
    }
    let me = std::env::current_exe().unwrap();
    let bytes = std::fs::read(guest()).expect("the GPU-summary guest: run `make guest`");
    let artifact = std::env::temp_dir().join(format!("guest_memory-{}.cwasm", std::process::id()));
    let engine = Engine::new(&config("default")).unwrap();
    std::fs::write(&artifact, engine.precompile_component(&bytes).unwrap()).unwrap();
    for round in 0..3 {
        println!("round {round}");
        for v in VARIANTS {
            let status = Command::new(&me)
                .args(["--variant", v])
                .env("GUEST_MEMORY_ARTIFACT", &artifact)
                .status()
                .unwrap();
            assert!(status.success(), "{v}");
        }
    }
    let _ = std::fs::remove_file(&artifact);
}
