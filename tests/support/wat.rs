//! Hand-written guests for integration tests: a core module in WAT whose
//! `describe` returns a manifest laid out in memory by a tiny canonical-ABI
//! writer, turned into a component with our WIT at test time
//! (`wasmctrl_test_support::component`).

#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use wasmctrl_test_support::component::BUMP_REALLOC;

/// A watch on pods (all namespaces) with an aggregate key.
pub struct WatManifest {
    pub name: String,
    pub write_namespace: String,
    pub write_names: Vec<String>,
    pub aggregate_key: String,
}

impl WatManifest {
    /// Guest `name`, reconciling every pod under one key (`all`), that may
    /// write only the ConfigMap `name` in `namespace`.
    pub fn writing_its_own_configmap(name: &str, namespace: &str) -> Self {
        WatManifest {
            name: name.into(),
            write_namespace: namespace.into(),
            write_names: vec![name.into()],
            aggregate_key: "all".into(),
        }
    }
}

/// Linear memory image under construction, starting at `base`.
struct Mem {
    base: u32,
    buf: Vec<u8>,
}

impl Mem {
    fn alloc(&mut self, size: u32, align: u32) -> u32 {
        while !(self.base + self.buf.len() as u32).is_multiple_of(align) {
            self.buf.push(0);
        }
        let at = self.base + self.buf.len() as u32;
        self.buf.resize(self.buf.len() + size as usize, 0);
        at
    }
    fn u8(&mut self, at: u32, v: u8) {
        self.buf[(at - self.base) as usize] = v;
    }
    fn u32(&mut self, at: u32, v: u32) {
        let i = (at - self.base) as usize;
        self.buf[i..i + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn string(&mut self, at: u32, s: &str) {
        let ptr = self.alloc(s.len() as u32, 1);
        let i = (ptr - self.base) as usize;
        self.buf[i..i + s.len()].copy_from_slice(s.as_bytes());
        self.u32(at, ptr);
        self.u32(at + 4, s.len() as u32);
    }
    fn strings(&mut self, at: u32, items: &[&str]) {
        let list = self.alloc(8 * items.len() as u32, 4);
        for (i, s) in items.iter().enumerate() {
            self.string(list + 8 * i as u32, s);
        }
        self.u32(at, list);
        self.u32(at + 4, items.len() as u32);
    }
    fn gvk(&mut self, at: u32, version: &str, kind: &str) {
        self.string(at, "");
        self.string(at + 8, version);
        self.string(at + 16, kind);
    }
    fn data_segment(&self) -> String {
        let mut s = format!("(data (i32.const {}) \"", self.base);
        for b in &self.buf {
            s.push_str(&format!("\\{b:02x}"));
        }
        s.push_str("\")");
        s
    }
}

/// Memory image of `ok(manifest)`: returns (data segment, address).
fn manifest_image(m: &WatManifest, base: u32) -> (String, u32) {
    let mut mem = Mem {
        base,
        buf: Vec::new(),
    };
    // result<manifest, string>: tag @0, manifest @4 (name, watches, writes,
    // option<u32> resync).
    let ret = mem.alloc(36, 4);
    mem.u8(ret, 0);
    mem.string(ret + 4, &m.name);
    // One watch (100 bytes): gvk @0, plural @24, namespace @36, labels @48,
    // fields @60 (options: tag + string), fields list @72, indexes @80,
    // key-mapping @88 (tag + string).
    let watch = mem.alloc(100, 4);
    mem.gvk(watch, "v1", "Pod");
    mem.u8(watch + 24, 1);
    mem.string(watch + 28, "pods");
    mem.strings(watch + 72, &["spec.nodeName", "status.phase"]);
    mem.u8(watch + 88, 1);
    mem.string(watch + 92, &m.aggregate_key);
    mem.u32(ret + 12, watch);
    mem.u32(ret + 16, 1);
    // One write rule (44 bytes): gvk @0, namespace option @24, names @36.
    let rule = mem.alloc(44, 4);
    mem.gvk(rule, "v1", "ConfigMap");
    mem.u8(rule + 24, 1);
    mem.string(rule + 28, &m.write_namespace);
    let names: Vec<&str> = m.write_names.iter().map(String::as_str).collect();
    mem.strings(rule + 36, &names);
    mem.u32(ret + 20, rule);
    mem.u32(ret + 24, 1);
    (mem.data_segment(), ret)
}

/// Memory image of `ok(plan { apply: docs })`.
fn plan_image(docs: &[String], base: u32) -> (String, u32) {
    let mut mem = Mem {
        base,
        buf: Vec::new(),
    };
    // result<plan, reconcile-error>: tag @0, plan @8: apply @8, delete @16,
    // events @24, option<u64> @32.
    let ret = mem.alloc(48, 8);
    let items: Vec<&str> = docs.iter().map(String::as_str).collect();
    mem.strings(ret + 8, &items);
    (mem.data_segment(), ret)
}

/// What the guest's `reconcile` does.
pub enum Behaviour {
    /// Applies these documents.
    Apply(Vec<String>),
    /// Traps.
    Trap,
    /// Loops until the deadline.
    Spin,
    /// Counts to this number (a slow reconcile), then applies the documents.
    SlowApply(u32, Vec<String>),
}

/// The component bytes.
pub fn guest(m: &WatManifest, behaviour: Behaviour) -> Vec<u8> {
    let (manifest_data, manifest_at) = manifest_image(m, 16_384);
    let (plan_data, body) = match behaviour {
        Behaviour::Apply(docs) => {
            let (d, at) = plan_image(&docs, 32_768);
            (d, format!("(i32.const {at})"))
        }
        Behaviour::SlowApply(n, docs) => {
            let (d, at) = plan_image(&docs, 32_768);
            let body = format!(
                "(local $i i32) (loop (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if 0 (i32.lt_u (local.get $i) (i32.const {n})))) (i32.const {at})"
            );
            (d, body)
        }
        Behaviour::Trap => (String::new(), "unreachable".to_string()),
        Behaviour::Spin => (String::new(), "(loop (br 0)) unreachable".to_string()),
    };
    let wat = format!(
        r#"(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  {manifest_data}
  {plan_data}
  {BUMP_REALLOC}
  (func (export "wasmctrl:controller/reconciler@0.1.0#describe") (param i32 i32 i32 i32) (result i32)
    (i32.const {manifest_at}))
  (func (export "wasmctrl:controller/reconciler@0.1.0#reconcile") (param i32) (result i32)
    {body}))"#
    );
    wasmctrl_test_support::component::component_from_wat(&wat)
}

/// A ConfigMap document in `namespace` named `name` with `data`.
pub fn configmap_doc(namespace: &str, name: &str, data: &[(&str, &str)]) -> String {
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace}, "data": data})
    .to_string()
}
