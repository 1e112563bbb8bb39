/**
 * Native test helpers for `node --test`: {@link World} and {@link Obj}
 * (snapshots described by watch and field name, key mappings applied as
 * the host applies them), requests and environments for tests, and
 * {@link LabelSelector}. Run the guest with `describe`/`reconcile` from the
 * SDK, the same path as its component export.
 * @module
 */

export * from "./selector.js";
export * from "./world.js";
