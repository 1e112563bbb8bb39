/**
 * The wasmctrl guest SDK for TypeScript, contract `wasmctrl:controller@0.3.0`:
 * the same idiom as the Rust SDK (`wit/rust/sdk`).
 *
 * - {@link Guest} and {@link exportGuest}: `describe`/`fields`/`reconcile`
 *   with SDK types, wired to the component's `reconciler` export.
 * - {@link Schema}, {@link Snapshot}, {@link SnapshotObject}: snapshot
 *   access by watch and field name, resolved once into handles.
 * - {@link view} and {@link field}: typed views whose fields name their
 *   paths once.
 * - {@link Manifest}, {@link Watch}, {@link WriteRule}: the manifest as builders.
 * - {@link Plan} and {@link document}: apply, update, status, finalizers,
 *   delete, events; owner references with {@link controllerRef} and
 *   {@link ownerRef}, read back with {@link controllerOwner}.
 * - {@link lifecycle}: `live`, `deleting` (clean up, then release the
 *   host-managed finalizer), `gone`, `unselected`.
 * - {@link settings}, {@link rfc3339}, conditions ({@link ownedConditions},
 *   {@link setCondition}), {@link log}.
 * - `wasmctrl-guest-sdk/testing`: the World, building snapshots and
 *   applying the manifest's key mappings as the host does, for `node --test`.
 *
 * The SDK does no I/O and imports nothing from the component at run time.
 * @module
 */

export * from "./condition.js";
export * from "./config.js";
export * from "./errors.js";
export * from "./layout.js";
export * from "./lifecycle.js";
export * as log from "./log.js";
export * from "./manifest.js";
export * from "./owner.js";
export * from "./plan.js";
export * from "./run.js";
export * from "./snapshot.js";
export * from "./time.js";
export * from "./view.js";
export type * as wit from "./wit.js";
