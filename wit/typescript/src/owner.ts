/**
 * Owner references: `metav1.OwnerReference` built from an object of the
 * snapshot ({@link ownerRef}, {@link controllerRef}), so a child document
 * names exactly the owner incarnation the guest saw (its uid), and read
 * back from a projected object ({@link controllerOwner}). Put one on a
 * document with `Document.ownedBy`. Never checks the Kubernetes rule on
 * owner scope: the API server's garbage collector enforces it.
 * @module
 */

import type { SnapshotObject } from "./snapshot.js";

/** The path {@link controllerOwner} reads: add it to the watch's fields. */
export const OWNER_REFERENCES = "metadata.ownerReferences";

/** `metav1.OwnerReference`; `controller` and `blockOwnerDeletion` left out when unset. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A plain owner reference to `owner` (its watch's apiVersion and kind, its name and uid). */
export function ownerRef(owner: SnapshotObject): OwnerReference {
  const target = owner.ref();
  return { apiVersion: target.apiVersion, kind: target.kind, name: target.name, uid: owner.uid };
}

/**
 * The controller reference to `owner`, as apimachinery's `NewControllerRef`
 * makes it: {@link ownerRef} with `controller` and `blockOwnerDeletion` true.
 */
export function controllerRef(owner: SnapshotObject): OwnerReference {
  return { ...ownerRef(owner), controller: true, blockOwnerDeletion: true };
}

/**
 * The controller owner of `object` (the `metadata.ownerReferences` entry
 * with `controller: true`), `undefined` when it has none; throws a
 * SchemaError when its watch does not project {@link OWNER_REFERENCES}.
 */
export function controllerOwner(object: SnapshotObject): OwnerReference | undefined {
  const list = object.text(object.field(OWNER_REFERENCES));
  if (list === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(list);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed)) return undefined;
  return parsed.find((r): r is OwnerReference => typeof r === "object" && r !== null && r.controller === true);
}
