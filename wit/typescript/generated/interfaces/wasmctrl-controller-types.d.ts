declare module 'wasmctrl:controller/types@0.3.0' {
  /**
   * Identifies a Kubernetes API type. `group` is "" for the core group
   * (pods, configmaps, nodes, ...).
   */
  export interface GroupVersionKind {
    /**
     * API group, e.g. "" (core), "apps", "coordination.k8s.io".
     */
    group: string,
    /**
     * API version inside the group, e.g. "v1".
     */
    version: string,
    /**
     * Kind, e.g. "Pod", "ConfigMap".
     */
    kind: string,
  }
  /**
   * Relates a secondary watch's objects to a primary through an index.
   */
  export interface IndexLink {
    /**
     * The primary watch's name, or `same-namespace:NAME` to relate
     * only objects of one namespace: a change enqueues the primaries
     * of this object's namespace whose index holds a value of its
     * field, and a primary's snapshot holds only the matching objects
     * of its namespace (a ConfigMap `shared` and the primaries of its
     * namespace that name it, not those of other namespaces naming a
     * `shared` of their own). Watch names are DNS labels, so no name
     * has the prefix.
     */
    primary: string,
    /**
     * The name of an index declared on the primary watch.
     */
    index: string,
    /**
     * A field path of this (secondary) watch, listed in its `fields`,
     * whose values are matched against the primary's index keys.
     */
    field: string,
  }
  /**
   * How changes to a watched object turn into reconcile requests.
   * 
   * A watch with `per-object` keys is a *primary*: its objects are what
   * the guest reconciles one by one. The other mappings relate a
   * secondary watch's objects to primaries (by watch name), and decide
   * both which primary keys a change enqueues and which of the watch's
   * objects a primary's snapshot holds.
   */
  export type KeyMapping = KeyMappingPerObject | KeyMappingAggregate | KeyMappingNone | KeyMappingOwner | KeyMappingSameNamespace | KeyMappingByIndex | KeyMappingAll;
  /**
   * Each object is its own request; the key is "namespace/name"
   * (just "name" for cluster-scoped objects). An object leaving the
   * watch (deleted, or no longer matching its selectors) enqueues
   * the key too: the request's `presence` says which, and the
   * snapshot no longer holds the object (see `reconcile`).
   */
  export interface KeyMappingPerObject {
    tag: 'per-object',
  }
  /**
   * Every change enqueues this one fixed key. Use it when the desired
   * state is a function of the whole world (a summary, a report).
   * An aggregate key's snapshot holds every watched object.
   */
  export interface KeyMappingAggregate {
    tag: 'aggregate',
    val: string,
  }
  /**
   * Changes never enqueue; the objects only appear in aggregate
   * snapshots.
   */
  export interface KeyMappingNone {
    tag: 'none',
  }
  /**
   * Owned objects: a change enqueues the object's controller owner
   * (the `ownerReferences` entry with `controller: true`) when it is
   * an object of the named primary watch. A primary's snapshot holds
   * the objects it controls.
   */
  export interface KeyMappingOwner {
    tag: 'owner',
    val: string,
  }
  /**
   * A change enqueues every object of the named primary watch in the
   * same namespace. A primary's snapshot holds this watch's objects
   * in its namespace. A Namespace primary stands for the namespace
   * it is; a primary of another cluster-scoped kind is refused.
   */
  export interface KeyMappingSameNamespace {
    tag: 'same-namespace',
    val: string,
  }
  /**
   * A change enqueues the objects of a primary watch whose index
   * holds a value this object's field has. A primary's snapshot
   * holds the objects whose field has one of the primary's index
   * values. With the primary written `same-namespace:NAME`, both
   * are kept to one namespace (see `index-link.primary`).
   */
  export interface KeyMappingByIndex {
    tag: 'by-index',
    val: IndexLink,
  }
  /**
   * A shared input: a change enqueues every object of the named
   * primary watch, and every primary's snapshot holds all of this
   * watch's objects, whatever their namespace (a platform-wide
   * ConfigMap of defaults, say).
   */
  export interface KeyMappingAll {
    tag: 'all',
    val: string,
  }
  /**
   * An index the host maintains over one watch and hands to the guest in
   * every snapshot, so the guest can find related objects without a scan.
   */
  export interface IndexSpec {
    /**
     * Name the guest looks the index up by; unique within its watch.
     */
    name: string,
    /**
     * Field path (same syntax as `watch.fields`) whose values are the
     * index keys. Each value the path yields puts the object under that
     * key; objects where it yields nothing are not indexed.
     */
    field: string,
  }
  /**
   * One set of objects the guest needs to see.
   */
  export interface Watch {
    /**
     * Unique name of this watch within the manifest (a lowercase DNS
     * label), used by key mappings, requests and the SDK.
     */
    name: string,
    /**
     * The type to list and watch.
     */
    gvk: GroupVersionKind,
    /**
     * Resource name in URLs ("pods"), as a claim the host checks: it
     * always lists the resource API discovery names for `gvk`, and
     * refuses the guest at start when this disagrees with it.
     */
    plural?: string,
    /**
     * Only this namespace; absent means all namespaces (or a
     * cluster-scoped type).
     */
    namespace?: string,
    /**
     * Kubernetes label selector, evaluated by the API server,
     * e.g. "app=web,tier in (a,b),!legacy".
     */
    labelSelector?: string,
    /**
     * Kubernetes field selector, evaluated by the API server, e.g.
     * "spec.nodeName!=,status.phase!=Succeeded". An object that stops
     * matching either selector leaves the watch: its key reconciles
     * with `presence.unselected` (see `reconcile`).
     */
    fieldSelector?: string,
    /**
     * The projection: the only fields of each object the host caches
     * and sends. Namespace and name are always present and need not be
     * listed. Path syntax, one path per entry:
     *   - `a.b.c` walks object fields;
     *   - `[*]` walks every element of a list, e.g.
     *     `spec.containers[*].image`;
     *   - `['key']` walks a map key that contains dots or slashes, e.g.
     *     `spec.overhead['nvidia.com/gpu']`.
     * A path without `[*]` yields exactly one value (`absent` when the
     * field is missing or null). A path with `[*]` yields one value per
     * list element it reaches, in order, so paths that share the same
     * list prefix line up element by element.
     */
    fields: Array<string>,
    /**
     * Indexes over this watch's objects.
     */
    indexes: Array<IndexSpec>,
    /**
     * Which requests a change to these objects causes.
     */
    keys: KeyMapping,
    /**
     * A finalizer (a qualified name such as "example.com/cleanup") the
     * host manages on this watch's objects: it adds it to every object
     * that lacks it and is not being deleted, and removes it when a
     * plan says `remove-finalizer` — so a guest sees every deletion
     * (its object with a deletion timestamp) and finishes its clean-up
     * first, even across host restarts. One exception: an object that
     * left the watch's selectors (`presence.unselected`) still carries
     * the finalizer, and the host would never see its deletion, so the
     * host removes it itself after that key's first successful
     * `unselected` reconcile. Only for a `per-object` watch.
     */
    finalizer?: string,
  }
  /**
   * Objects the guest may write. Anything else in a plan is rejected by
   * the host before a single request is sent.
   */
  export interface WriteRule {
    /**
     * The type that may be written.
     */
    gvk: GroupVersionKind,
    /**
     * Only in this namespace; absent allows any namespace (and is
     * required for cluster-scoped types).
     */
    namespace?: string,
    /**
     * Only these names; empty allows any name.
     */
    names: Array<string>,
    /**
     * Whether the guest may write these objects' status subresource.
     * The host refuses a manifest asking for it when the type has no
     * status subresource.
     */
    status: boolean,
  }
  /**
   * What the guest declares about itself. The host calls `describe` once
   * per module load (and again when the configuration changes).
   */
  export interface Manifest {
    /**
     * The guest's name: used in the field manager (`wasmctrl/<name>`),
     * metrics labels and logs. Lowercase DNS label.
     */
    name: string,
    /**
     * Everything the guest reads.
     */
    watches: Array<Watch>,
    /**
     * Everything the guest may write.
     */
    writes: Array<WriteRule>,
    /**
     * Re-enqueue every key this often; absent uses the host default
     * (10 minutes).
     */
    resyncSeconds?: number,
  }
  /**
   * What the operator configured for this guest.
   */
  export interface Environment {
    /**
     * The namespace the host runs in (its own Pod's namespace), the
     * natural default for anything the guest writes.
     */
    namespace: string,
    /**
     * Key/value configuration for this guest, in key order
     * (`--config GUEST.KEY=VALUE` or the guest's config file).
     */
    config: Array<[string, string]>,
    /**
     * The host's clock when the call started: milliseconds since the
     * Unix epoch (UTC). The guest stays a pure function of its
     * arguments and can still stamp `lastTransitionTime`. 0 in
     * `describe`; `wasmctrl reconcile --now` sets it offline.
     */
    nowMs: bigint,
  }
  /**
   * Where a primary key's object stands, as the server says.
   * # Variants
   * 
   * ## `"present"`
   * 
   * The watch holds it (live, or being deleted): the snapshot has it.
   * ## `"gone"`
   * 
   * The server no longer has it: it was deleted.
   * ## `"unselected"`
   * 
   * The server still has it, but it left the watch: its labels or
   * fields no longer match the watch's selectors.
   */
  export type Presence = 'present' | 'gone' | 'unselected';
  /**
   * What one reconcile is asked to do.
   */
  export interface Request {
    /**
     * The key: "namespace/name" (or "name") of a primary object, or an
     * aggregate key.
     */
    key: string,
    /**
     * For a primary object's key, the name of its watch; absent for an
     * aggregate key.
     */
    watch?: string,
    /**
     * For a primary object's key, where its object stands; absent for
     * an aggregate key.
     */
    presence?: Presence,
  }
  /**
   * Objects that share one index key.
   */
  export interface Bucket {
    /**
     * The index key (string index).
     */
    key: number,
    /**
     * Object indices, in snapshot order.
     */
    objects: Uint32Array,
  }
  /**
   * One guest-declared index, filled in.
   */
  export interface Index {
    /**
     * Index into `manifest.watches`.
     */
    watch: number,
    /**
     * The `index-spec.name`.
     */
    name: string,
    /**
     * Buckets sorted by key.
     */
    buckets: Array<Bucket>,
  }
  /**
   * The world as the host's caches saw it when the reconcile started.
   * 
   * Columnar ("struct of arrays") and interned, so that it stays cheap
   * at 100,000 objects: every bulk field is a list of plain integers,
   * which crosses the boundary as one block copy (a list of records or
   * variants is copied element by element, several times slower — see
   * wit/README.md for the measurements), and every distinct string
   * crosses once, inside one blob.
   * 
   * Objects are numbered 0..n in the order of `object-*` lists: sorted by
   * watch, then namespace, then name. Object `i` has one *slot* per entry
   * of its watch's `fields`, numbered from `object-first-slot[i]`; slot
   * `s` holds values `slot-ends[s-1] .. slot-ends[s]` (from 0 for s = 0).
   * Value `v` is `value-kinds[v]` with payload `value-data[v]`:
   * 
   * | kind | meaning                               | value-data          |
   * |------|---------------------------------------|---------------------|
   * | 0    | absent: missing or null               | 0                   |
   * | 1    | a JSON string                         | string index        |
   * | 2    | an integer                            | the s64, as bits    |
   * | 3    | any other number                      | the f64, as bits    |
   * | 4    | a boolean                             | 0 or 1              |
   * | 5    | an object or list, as compact JSON    | string index        |
   */
  export interface Snapshot {
    /**
     * All strings, concatenated (UTF-8). String `i` is
     * `strings[string-ends[i-1] .. string-ends[i]]` (from 0 for i = 0).
     * String 0 is always the empty string.
     */
    strings: string,
    /**
     * End offset (in bytes) of each string in `strings`.
     */
    stringEnds: Uint32Array,
    /**
     * Per object: index into `manifest.watches` of its watch.
     */
    objectWatch: Uint32Array,
    /**
     * Per object: namespace (string index; "" when cluster-scoped).
     */
    objectNamespace: Uint32Array,
    /**
     * Per object: name (string index).
     */
    objectName: Uint32Array,
    /**
     * Per object: metadata.uid (string index).
     */
    objectUid: Uint32Array,
    /**
     * Per object: metadata.generation (0 when the type has none).
     */
    objectGeneration: BigInt64Array,
    /**
     * Per object: metadata.deletionTimestamp (string index; 0, the
     * empty string, when the object is not being deleted).
     */
    objectDeletionTimestamp: Uint32Array,
    /**
     * Per object: its first slot.
     */
    objectFirstSlot: Uint32Array,
    /**
     * Per slot: end offset of its values.
     */
    slotEnds: Uint32Array,
    /**
     * Per value: its kind (table above).
     */
    valueKinds: Uint8Array,
    /**
     * Per value: its payload (table above).
     */
    valueData: BigUint64Array,
    /**
     * The indexes the manifest declared.
     */
    indexes: Array<Index>,
  }
  /**
   * Names one object the plan talks about.
   */
  export interface ObjectRef {
    /**
     * "v1", "apps/v1", ...
     */
    apiVersion: string,
    /**
     * Kind, e.g. "ConfigMap".
     */
    kind: string,
    /**
     * Namespace; absent for cluster-scoped objects.
     */
    namespace?: string,
    /**
     * Name.
     */
    name: string,
  }
  /**
   * Event severity, as Kubernetes defines it.
   * # Variants
   * 
   * ## `"normal"`
   * 
   * Something expected happened.
   * ## `"warning"`
   * 
   * Something an operator should look at.
   */
  export type EventType = 'normal' | 'warning';
  /**
   * A Kubernetes Event the host records on the guest's behalf
   * (`events.k8s.io/v1`). Recorded once per appearance in a plan, not on
   * every reconcile; a new message is a new event.
   */
  export interface Event {
    /**
     * The object the event is about.
     */
    regarding: ObjectRef,
    /**
     * A second object involved, if any.
     */
    related?: ObjectRef,
    /**
     * Normal or Warning.
     */
    eventType: EventType,
    /**
     * Short UpperCamelCase machine-readable reason, e.g. "OverLimit".
     */
    reason: string,
    /**
     * What the controller did or failed to do, UpperCamelCase, e.g.
     * "Reconcile".
     */
    action: string,
    /**
     * Human-readable message.
     */
    message: string,
  }
  /**
   * One object and one finalizer on it.
   */
  export interface FinalizerRef {
    /**
     * The object (as the snapshot saw it).
     */
    target: ObjectRef,
    /**
     * The finalizer, a qualified name ("example.com/cleanup").
     */
    finalizer: string,
  }
  /**
   * One write. Every write aimed at an object the guest saw is pinned to
   * that object's uid: if it is gone (or replaced by a namesake) the
   * write fails without creating anything and the key simply
   * re-reconciles; it is not an error.
   */
  export type Write = WriteApply | WriteUpdate | WriteApplyStatus | WriteDelete | WriteAddFinalizer | WriteRemoveFinalizer;
  /**
   * Create or update: server-side apply (force) of a complete JSON
   * document with apiVersion, kind, metadata.name (and namespace when
   * namespaced), holding exactly the fields this guest owns. A field
   * applied before and omitted now is removed. Skipped when the live
   * object already has these values. Creates the object if missing:
   * use it for objects the guest owns outright (a summary).
   */
  export interface WriteApply {
    tag: 'apply',
    val: string,
  }
  /**
   * Update only: like `apply`, but the object must exist as the
   * snapshot saw it (the host adds its `metadata.uid`). Never creates.
   */
  export interface WriteUpdate {
    tag: 'update',
    val: string,
  }
  /**
   * Server-side apply to the status subresource (only `status` is
   * taken), pinned like `update`. Needs `write-rule.status`.
   */
  export interface WriteApplyStatus {
    tag: 'apply-status',
    val: string,
  }
  /**
   * Delete, with the uid the snapshot saw as a precondition (when the
   * snapshot saw it); a missing object is not an error.
   */
  export interface WriteDelete {
    tag: 'delete',
    val: ObjectRef,
  }
  /**
   * Add a finalizer (pinned like `update`).
   */
  export interface WriteAddFinalizer {
    tag: 'add-finalizer',
    val: FinalizerRef,
  }
  /**
   * Remove a finalizer, pinned to the exact entry, so another
   * controller's finalizers are never touched. Removing a watch's
   * declared finalizer tells the host clean-up is done.
   */
  export interface WriteRemoveFinalizer {
    tag: 'remove-finalizer',
    val: FinalizerRef,
  }
  /**
   * The desired state the guest computed. The host makes it so.
   */
  export interface Plan {
    /**
     * Writes, carried out in order; the first failure stops the plan
     * and the key is retried with backoff.
     */
    writes: Array<Write>,
    /**
     * Events to record.
     */
    events: Array<Event>,
    /**
     * Reconcile this key again after this many milliseconds, even if
     * nothing changes.
     */
    requeueAfterMs?: bigint,
  }
  /**
   * Why a reconcile failed.
   */
  export type ReconcileError = ReconcileErrorRetryable | ReconcileErrorTerminal;
  /**
   * A transient problem: the host retries the key with per-item
   * exponential backoff.
   */
  export interface ReconcileErrorRetryable {
    tag: 'retryable',
    val: string,
  }
  /**
   * The input can never succeed (bad configuration, say): the host
   * reports it and does not retry until the key changes again.
   */
  export interface ReconcileErrorTerminal {
    tag: 'terminal',
    val: string,
  }
}
