//! Hand-written guests for integration tests: a core module in WAT whose
//! `describe` returns a manifest laid out in memory by a tiny canonical-ABI
//! writer (the 0.2 `manifest` and `plan` records), turned into a component
//! with our WIT at test time (`wasmctrl_test_support::component`).

#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use wasmctrl_test_support::component::BUMP_REALLOC;

/// How a watch's changes become keys (the WIT `key-mapping`).
#[derive(Clone)]
pub enum WatKeys {
    PerObject,
    Aggregate(String),
    None,
    Owner(String),
    SameNamespace(String),
    ByIndex {
        primary: String,
        index: String,
        field: String,
    },
}

/// One watch (the WIT `watch`).
#[derive(Clone)]
pub struct WatWatch {
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: Option<String>,
    /// Watched in this namespace only (None: every namespace).
    pub namespace: Option<String>,
    pub fields: Vec<String>,
    pub indexes: Vec<(String, String)>,
    pub keys: WatKeys,
    pub finalizer: Option<String>,
    /// Only the objects this label selector matches (the WIT
    /// `label-selector`).
    pub label_selector: Option<String>,
}

impl WatWatch {
    /// Pods in every namespace, projecting node and phase.
    pub fn pods(name: &str, keys: WatKeys) -> Self {
        WatWatch {
            name: name.into(),
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
            plural: Some("pods".into()),
            namespace: None,
            fields: vec!["spec.nodeName".into(), "status.phase".into()],
            indexes: Vec::new(),
            keys,
            finalizer: None,
            label_selector: None,
        }
    }
}

/// One write rule (the WIT `write-rule`).
#[derive(Clone)]
pub struct WatRule {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub names: Vec<String>,
    pub status: bool,
}

/// A manifest (the WIT `manifest`).
#[derive(Clone)]
pub struct WatManifest {
    pub name: String,
    pub watches: Vec<WatWatch>,
    pub writes: Vec<WatRule>,
}

impl WatManifest {
    /// Guest `name`, reconciling every pod under one key (`all`), that may
    /// write only the ConfigMap `name` in `namespace`.
    pub fn writing_its_own_configmap(name: &str, namespace: &str) -> Self {
        WatManifest {
            name: name.into(),
            watches: vec![WatWatch::pods("pods", WatKeys::Aggregate("all".into()))],
            writes: vec![WatRule {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some(namespace.into()),
                names: vec![name.into()],
                status: false,
            }],
        }
    }
}

/// A field of the reconciled object (the snapshot's object 0) a plan
/// string can name: `{name}`, `{namespace}` or `{uid}`, filled in at
/// reconcile time. Its offset is that per-object list's in the reconcile
/// arguments.
const PLACEHOLDERS: [(&str, u32); 3] = [("{namespace}", 68), ("{name}", 76), ("{uid}", 84)];

/// One piece of a plan string filled in at reconcile time.
enum Piece {
    /// Bytes already in memory: (address, length).
    Literal(u32, u32),
    /// The reconciled object's field at this argument offset.
    Field(u32),
}

/// A plan string with placeholders: where its (pointer, length) goes.
struct Template {
    slot: u32,
    pieces: Vec<Piece>,
}

/// Linear memory image under construction, starting at `base`.
struct Mem {
    base: u32,
    buf: Vec<u8>,
    templates: Vec<Template>,
}

impl Mem {
    fn new(base: u32) -> Self {
        Mem {
            base,
            buf: Vec::new(),
            templates: Vec::new(),
        }
    }
    /// Code that fills in every template string of this image (run before
    /// the plan is returned; see [`PLACEHOLDERS`]).
    fn fill_code(&self) -> String {
        let mut code = String::new();
        for t in &self.templates {
            code.push_str("(local.set $start (global.get $out))\n");
            for p in &t.pieces {
                match p {
                    Piece::Literal(at, len) => code.push_str(&format!(
                        "(memory.copy (global.get $out) (i32.const {at}) (i32.const {len})) (global.set $out (i32.add (global.get $out) (i32.const {len})))\n"
                    )),
                    Piece::Field(off) => {
                        code.push_str(&format!("(call $copy_field (local.get 0) (i32.const {off}))\n"))
                    }
                }
            }
            code.push_str(&format!(
                "(i32.store (i32.const {}) (local.get $start)) (i32.store (i32.const {}) (i32.sub (global.get $out) (local.get $start)))\n",
                t.slot,
                t.slot + 4
            ));
        }
        code
    }
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
        if PLACEHOLDERS.iter().any(|(p, _)| s.contains(p)) {
            return self.template(at, s);
        }
        let ptr = self.alloc(s.len() as u32, 1);
        let i = (ptr - self.base) as usize;
        self.buf[i..i + s.len()].copy_from_slice(s.as_bytes());
        self.u32(at, ptr);
        self.u32(at + 4, s.len() as u32);
    }
    /// A string with placeholders: its literal pieces in memory, the rest
    /// filled in at reconcile time.
    fn template(&mut self, at: u32, s: &str) {
        let mut pieces = Vec::new();
        let mut rest = s;
        while !rest.is_empty() {
            let next = PLACEHOLDERS
                .iter()
                .filter_map(|(p, off)| rest.find(p).map(|i| (i, *p, *off)))
                .min_by_key(|(i, _, _)| *i);
            let (lit, field) = match next {
                Some((i, p, off)) => (&rest[..i], Some((p, off))),
                None => (rest, None),
            };
            if !lit.is_empty() {
                let ptr = self.alloc(lit.len() as u32, 1);
                let i = (ptr - self.base) as usize;
                self.buf[i..i + lit.len()].copy_from_slice(lit.as_bytes());
                pieces.push(Piece::Literal(ptr, lit.len() as u32));
            }
            rest = &rest[lit.len()..];
            if let Some((p, off)) = field {
                pieces.push(Piece::Field(off));
                rest = &rest[p.len()..];
            }
        }
        self.templates.push(Template { slot: at, pieces });
    }
    /// option<string>: tag @0, string @4.
    fn opt_string(&mut self, at: u32, s: Option<&str>) {
        if let Some(s) = s {
            self.u8(at, 1);
            self.string(at + 4, s);
        }
    }
    fn strings(&mut self, at: u32, items: &[String]) {
        let list = self.alloc(8 * items.len() as u32, 4);
        for (i, s) in items.iter().enumerate() {
            self.string(list + 8 * i as u32, s);
        }
        self.u32(at, list);
        self.u32(at + 4, items.len() as u32);
    }
    fn gvk(&mut self, at: u32, group: &str, version: &str, kind: &str) {
        self.string(at, group);
        self.string(at + 8, version);
        self.string(at + 16, kind);
    }
    /// object-ref (36 bytes): api-version @0, kind @8, namespace
    /// option<string> @16, name @28.
    fn object_ref(&mut self, at: u32, r: &WatRef) {
        self.string(at, &r.api_version);
        self.string(at + 8, &r.kind);
        self.opt_string(at + 16, r.namespace.as_deref());
        self.string(at + 28, &r.name);
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
    let mut mem = Mem::new(base);
    // result<manifest, string>: tag @0, manifest @4 (name @4, watches @12,
    // writes @20, option<u32> resync @28).
    let ret = mem.alloc(36, 4);
    mem.string(ret + 4, &m.name);
    // watch (136 bytes): name @0, gvk @8, plural @32, namespace @44,
    // labels @56, fields-selector @68 (option<string>: tag + string),
    // fields @80, indexes @88, key-mapping @96 (tag, payload @100, 28
    // bytes), finalizer option<string> @124.
    let watches = mem.alloc(136 * m.watches.len() as u32, 4);
    for (i, w) in m.watches.iter().enumerate() {
        let at = watches + 136 * i as u32;
        mem.string(at, &w.name);
        mem.gvk(at + 8, &w.group, &w.version, &w.kind);
        mem.opt_string(at + 32, w.plural.as_deref());
        mem.opt_string(at + 44, w.namespace.as_deref());
        mem.opt_string(at + 56, w.label_selector.as_deref());
        mem.strings(at + 80, &w.fields);
        let indexes = mem.alloc(16 * w.indexes.len() as u32, 4);
        for (x, (name, field)) in w.indexes.iter().enumerate() {
            mem.string(indexes + 16 * x as u32, name);
            mem.string(indexes + 16 * x as u32 + 8, field);
        }
        mem.u32(at + 88, indexes);
        mem.u32(at + 92, w.indexes.len() as u32);
        let k = at + 96;
        match &w.keys {
            WatKeys::PerObject => mem.u8(k, 0),
            WatKeys::Aggregate(key) => {
                mem.u8(k, 1);
                mem.string(k + 4, key);
            }
            WatKeys::None => mem.u8(k, 2),
            WatKeys::Owner(p) => {
                mem.u8(k, 3);
                mem.string(k + 4, p);
            }
            WatKeys::SameNamespace(p) => {
                mem.u8(k, 4);
                mem.string(k + 4, p);
            }
            WatKeys::ByIndex {
                primary,
                index,
                field,
            } => {
                mem.u8(k, 5);
                mem.string(k + 4, primary);
                mem.string(k + 12, index);
                mem.string(k + 20, field);
            }
        }
        mem.opt_string(at + 124, w.finalizer.as_deref());
    }
    mem.u32(ret + 12, watches);
    mem.u32(ret + 16, m.watches.len() as u32);
    // write-rule (48 bytes): gvk @0, namespace option @24, names @36,
    // status bool @44.
    let rules = mem.alloc(48 * m.writes.len() as u32, 4);
    for (i, r) in m.writes.iter().enumerate() {
        let at = rules + 48 * i as u32;
        mem.gvk(at, &r.group, &r.version, &r.kind);
        mem.opt_string(at + 24, r.namespace.as_deref());
        mem.strings(at + 36, &r.names);
        mem.u8(at + 44, u8::from(r.status));
    }
    mem.u32(ret + 20, rules);
    mem.u32(ret + 24, m.writes.len() as u32);
    (mem.data_segment(), ret)
}

/// An object reference in a plan.
#[derive(Clone)]
pub struct WatRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// One write of a plan (the WIT `write`).
#[derive(Clone)]
pub enum WatWrite {
    Apply(String),
    Update(String),
    ApplyStatus(String),
    Delete(WatRef),
    AddFinalizer(WatRef, String),
    RemoveFinalizer(WatRef, String),
}

/// One event of a plan (the WIT `event`).
#[derive(Clone)]
pub struct WatEvent {
    pub regarding: WatRef,
    pub related: Option<WatRef>,
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// Memory image of `ok(plan { writes })`.
fn plan_image(writes: &[WatWrite], base: u32) -> (String, u32) {
    let (data, at, fill) = plan_image_with_events(writes, &[], base);
    assert!(fill.is_empty(), "placeholders only in a ByLifecycle plan");
    (data, at)
}

/// Memory image of `ok(plan { writes, events })`: (data segment, address,
/// the code that fills in its placeholders).
fn plan_image_with_events(
    writes: &[WatWrite],
    events: &[WatEvent],
    base: u32,
) -> (String, u32, String) {
    let (mem, at) = plan_mem(writes, events, base);
    (mem.data_segment(), at, mem.fill_code())
}

/// `ok(plan { writes, events })` laid out in memory, and its address.
fn plan_mem(writes: &[WatWrite], events: &[WatEvent], base: u32) -> (Mem, u32) {
    let mut mem = Mem::new(base);
    // result<plan, reconcile-error>: tag @0, plan @8: writes @8, events
    // @16, option<u64> @24 (payload @32).
    let ret = mem.alloc(40, 8);
    // write (48 bytes): tag @0, payload @4.
    let list = mem.alloc(48 * writes.len() as u32, 4);
    for (i, w) in writes.iter().enumerate() {
        let at = list + 48 * i as u32;
        match w {
            WatWrite::Apply(doc) => mem.string(at + 4, doc),
            WatWrite::Update(doc) => {
                mem.u8(at, 1);
                mem.string(at + 4, doc);
            }
            WatWrite::ApplyStatus(doc) => {
                mem.u8(at, 2);
                mem.string(at + 4, doc);
            }
            WatWrite::Delete(r) => {
                mem.u8(at, 3);
                mem.object_ref(at + 4, r);
            }
            WatWrite::AddFinalizer(r, f) | WatWrite::RemoveFinalizer(r, f) => {
                mem.u8(
                    at,
                    if matches!(w, WatWrite::AddFinalizer(..)) {
                        4
                    } else {
                        5
                    },
                );
                mem.object_ref(at + 4, r);
                mem.string(at + 40, f);
            }
        }
    }
    mem.u32(ret + 8, list);
    mem.u32(ret + 12, writes.len() as u32);
    // event (104 bytes): regarding @0, related option<object-ref> @36
    // (payload @40), event-type @76, reason @80, action @88, message @96.
    let list = mem.alloc(104 * events.len() as u32, 4);
    for (i, e) in events.iter().enumerate() {
        let at = list + 104 * i as u32;
        mem.object_ref(at, &e.regarding);
        if let Some(r) = &e.related {
            mem.u8(at + 36, 1);
            mem.object_ref(at + 40, r);
        }
        mem.u8(at + 76, u8::from(e.warning));
        mem.string(at + 80, &e.reason);
        mem.string(at + 88, "Reconcile");
        mem.string(at + 96, &e.message);
    }
    mem.u32(ret + 16, list);
    mem.u32(ret + 20, events.len() as u32);
    (mem, ret)
}

/// Where [`STAMP`] occurs in `mem`.
fn stamp_addresses(mem: &Mem) -> Vec<u32> {
    let stamp = STAMP.as_bytes();
    (0..mem.buf.len().saturating_sub(stamp.len() - 1))
        .filter(|&i| &mem.buf[i..i + stamp.len()] == stamp)
        .map(|i| mem.base + i as u32)
        .collect()
}

/// A placeholder in a [`Behaviour::Stamped`] plan's documents: replaced, in
/// every reconcile, by the host's clock (`environment.now-ms`) as 20
/// decimal digits.
pub const STAMP: &str = "%%%%%%%%%%%%%%%%%%%%";

/// What the guest's `reconcile` does.
pub enum Behaviour {
    /// Applies these documents.
    Apply(Vec<String>),
    /// Returns this plan, every time.
    Plan {
        writes: Vec<WatWrite>,
        events: Vec<WatEvent>,
    },
    /// Traps.
    Trap,
    /// Loops until the deadline.
    Spin,
    /// Applies these documents and asks to be requeued after 0 ms.
    RequeueNow(Vec<String>),
    /// Counts to this number (a slow reconcile), then applies the documents.
    SlowApply(u32, Vec<String>),
    /// A per-object controller of one primary watch (watch 0): nothing
    /// when its snapshot holds no object of that watch (the object is
    /// gone; related objects may be left), `live` while the object lives,
    /// `deleting` once it has a deletion timestamp. Strings in these
    /// plans may name the object: `{name}`, `{namespace}`, `{uid}`.
    ByLifecycle {
        live: Vec<WatWrite>,
        deleting: Vec<WatWrite>,
    },
    /// Returns this plan with every [`STAMP`] in its documents replaced by
    /// the call's clock: a different write on every reconcile, as a
    /// controller setting `lastSyncTime = now()` makes.
    Stamped(Vec<WatWrite>),
}

/// Offsets in the reconcile arguments (tuple<environment, request,
/// snapshot>, passed by pointer): environment @0 (24 bytes, align 8),
/// request @24 (20), snapshot @44: strings @44, string-ends @52,
/// object-watch @60 (its length @64), object-namespace @68, object-name
/// @76, object-uid @84, object-deletion-timestamp @100.
const OBJECT_WATCH: u32 = 60;
const OBJECTS_LEN: u32 = 64;
const DELETION_TIMESTAMPS: u32 = 100;

/// Where filled-in plan strings are written (up to the heap at 64 KiB).
const FILLED: u32 = 53_248;

/// `$copy_field(args, offset)`: appends object 0's string field at
/// `offset` (a per-object list of string indexes) at `$out`.
const COPY_FIELD: &str = r#"(func $copy_field (param $a i32) (param $off i32)
    (local $idx i32) (local $ends i32) (local $start i32) (local $end i32)
    (local.set $idx (i32.load (i32.load (i32.add (local.get $a) (local.get $off)))))
    (local.set $ends (i32.load (i32.add (local.get $a) (i32.const 52))))
    (local.set $end (i32.load (i32.add (local.get $ends) (i32.shl (local.get $idx) (i32.const 2)))))
    (local.set $start (if (result i32) (local.get $idx)
      (then (i32.load (i32.add (local.get $ends) (i32.shl (i32.sub (local.get $idx) (i32.const 1)) (i32.const 2)))))
      (else (i32.const 0))))
    (memory.copy (global.get $out)
      (i32.add (i32.load (i32.add (local.get $a) (i32.const 44))) (local.get $start))
      (i32.sub (local.get $end) (local.get $start)))
    (global.set $out (i32.add (global.get $out) (i32.sub (local.get $end) (local.get $start)))))"#;

/// The component bytes.
pub fn guest(m: &WatManifest, behaviour: Behaviour) -> Vec<u8> {
    let (manifest_data, manifest_at) = manifest_image(m, 16_384);
    let (plan_data, body) = match behaviour {
        Behaviour::Apply(docs) => {
            let writes: Vec<WatWrite> = docs.into_iter().map(WatWrite::Apply).collect();
            let (d, at) = plan_image(&writes, 32_768);
            (d, format!("(i32.const {at})"))
        }
        Behaviour::Plan { writes, events } => {
            let (d, at, fill) = plan_image_with_events(&writes, &events, 32_768);
            assert!(fill.is_empty(), "placeholders only in a ByLifecycle plan");
            (d, format!("(i32.const {at})"))
        }
        Behaviour::RequeueNow(docs) => {
            let writes: Vec<WatWrite> = docs.into_iter().map(WatWrite::Apply).collect();
            let (d, at) = plan_image(&writes, 32_768);
            // A later segment wins: set the option<u64> tag; its payload
            // (0 ms) is already zero.
            let tag = at + 24;
            (
                format!("{d}\n  (data (i32.const {tag}) \"\\01\")"),
                format!("(i32.const {at})"),
            )
        }
        Behaviour::SlowApply(n, docs) => {
            let writes: Vec<WatWrite> = docs.into_iter().map(WatWrite::Apply).collect();
            let (d, at) = plan_image(&writes, 32_768);
            let body = format!(
                "(loop (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if 0 (i32.lt_u (local.get $i) (i32.const {n})))) (i32.const {at})"
            );
            (d, body)
        }
        Behaviour::ByLifecycle { live, deleting } => {
            let (empty_d, empty) = plan_image(&[], 32_768);
            let (live_d, live_at, live_fill) = plan_image_with_events(&live, &[], 36_864);
            let (del_d, del_at, del_fill) = plan_image_with_events(&deleting, &[], 45_056);
            // Gone: no object, or object 0 is not of watch 0 (only related
            // objects are left).
            let body = format!(
                "(if (result i32) (i32.or (i32.eqz (i32.load (i32.add (local.get 0) (i32.const {OBJECTS_LEN}))))
                                          (i32.load (i32.load (i32.add (local.get 0) (i32.const {OBJECT_WATCH})))))
                   (then (i32.const {empty}))
                   (else (if (result i32) (i32.load (i32.load (i32.add (local.get 0) (i32.const {DELETION_TIMESTAMPS}))))
                     (then {del_fill} (i32.const {del_at}))
                     (else {live_fill} (i32.const {live_at})))))"
            );
            (format!("{empty_d}\n  {live_d}\n  {del_d}"), body)
        }
        Behaviour::Stamped(writes) => {
            let (mem, at) = plan_mem(&writes, &[], 32_768);
            // environment.now-ms sits at offset 16 of the arguments.
            let mut body = String::new();
            for addr in stamp_addresses(&mem) {
                body.push_str(&format!(
                    "
    (local.set $n (i64.load offset=16 (local.get 0)))
    (local.set $i (i32.const 20))
    (loop
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (i32.add (i32.const {addr}) (local.get $i))
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $n) (i64.const 10)))))
      (local.set $n (i64.div_u (local.get $n) (i64.const 10)))
      (br_if 0 (local.get $i)))"
                ));
            }
            body.push_str(&format!(" (i32.const {at})"));
            (mem.data_segment(), body)
        }
        Behaviour::Trap => (String::new(), "unreachable".to_string()),
        Behaviour::Spin => (String::new(), "(loop (br 0)) unreachable".to_string()),
    };
    let wat = format!(
        r#"(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (global $out (mut i32) (i32.const {FILLED}))
  {manifest_data}
  {plan_data}
  {BUMP_REALLOC}
  {COPY_FIELD}
  (func (export "wasmctrl:controller/reconciler@0.3.0#describe") (param i32 i32 i32 i32 i64) (result i32)
    (i32.const {manifest_at}))
  (func (export "wasmctrl:controller/reconciler@0.3.0#reconcile") (param i32) (result i32)
    (local $start i32) (local $i i32) (local $n i64)
    (global.set $out (i32.const {FILLED}))
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

/// A guest whose `describe` traps (so no manifest, no name: it is known by
/// its file stem).
pub fn trapping_in_describe() -> Vec<u8> {
    let wat = format!(
        r#"(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  {BUMP_REALLOC}
  (func (export "wasmctrl:controller/reconciler@0.3.0#describe") (param i32 i32 i32 i32 i64) (result i32)
    unreachable)
  (func (export "wasmctrl:controller/reconciler@0.3.0#reconcile") (param i32) (result i32)
    unreachable))"#
    );
    wasmctrl_test_support::component::component_from_wat(&wat)
}
