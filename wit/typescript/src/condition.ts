/**
 * Status conditions (`metav1.Condition`) the way controller-runtime's
 * `meta.SetStatusCondition` keeps them: `lastTransitionTime` changes only
 * when a condition's `status` changes, so a guest that recomputes the same
 * conditions every reconcile writes the same status and the host skips the
 * write. Reading the conditions an object has is a view field
 * (`field.conditions("status.conditions")`, see {@link conditionPaths}).
 * @module
 */

import { rfc3339 } from "./time.js";

/** One status condition; {@link toJSON} writes it in `metav1.Condition`'s field order. */
export interface Condition {
  /** The condition's type, e.g. `Ready` (the list's map key). */
  type: string;
  /** `True`, `False` or `Unknown`. */
  status: string;
  /** The generation it was computed from (left out of JSON when 0). */
  observedGeneration: number;
  /** When `status` last changed (RFC 3339); "" until set. */
  lastTransitionTime: string;
  /** UpperCamelCase machine-readable reason. */
  reason: string;
  /** Human-readable detail. */
  message: string;
}

/**
 * A condition whose status is `True` or `False`, with no transition time
 * yet ({@link setCondition} stamps it).
 */
export function condition(type: string, status: boolean, reason: string, message: string, observedGeneration = 0): Condition {
  return { type, status: status ? "True" : "False", observedGeneration, lastTransitionTime: "", reason, message };
}

/** `c` as `metav1.Condition` JSON, in its field order. */
export function conditionJSON(c: Condition): Record<string, string | number> {
  const out: Record<string, string | number> = { type: c.type, status: c.status };
  if (c.observedGeneration !== 0) out.observedGeneration = c.observedGeneration;
  out.lastTransitionTime = c.lastTransitionTime;
  out.reason = c.reason;
  out.message = c.message;
  return out;
}

/** The condition of type `type`, if present. */
export function findCondition(conditions: readonly Condition[], type: string): Condition | undefined {
  return conditions.find((c) => c.type === type);
}

/** Whether the condition of type `type` is present and `True`. */
export function isConditionTrue(conditions: readonly Condition[], type: string): boolean {
  return findCondition(conditions, type)?.status === "True";
}

/**
 * Sets `next` in `conditions` (by type) as `meta.SetStatusCondition` does:
 * a new condition, or one whose status changes, gets `next`'s
 * `lastTransitionTime` if set, else `nowMs`; otherwise the existing time is
 * kept (filled in with `nowMs` when missing). Reason, message and
 * observedGeneration follow `next`. Returns whether anything changed.
 */
export function setCondition(conditions: Condition[], next: Condition, nowMs: number | bigint): boolean {
  const stamp = (c: Condition) => (c.lastTransitionTime === "" ? rfc3339(nowMs) : c.lastTransitionTime);
  const old = conditions.find((c) => c.type === next.type);
  if (!old) {
    conditions.push({ ...next, lastTransitionTime: stamp(next) });
    return true;
  }
  let changed = false;
  if (old.status !== next.status) {
    old.lastTransitionTime = stamp(next);
    old.status = next.status;
    changed = true;
  } else if (old.lastTransitionTime === "") {
    old.lastTransitionTime = stamp(next);
    changed = true;
  }
  for (const key of ["reason", "message", "observedGeneration"] as const) {
    if (old[key] !== next[key]) {
      (old as unknown as Record<string, unknown>)[key] = next[key];
      changed = true;
    }
  }
  return changed;
}

/**
 * The conditions of a controller that owns one condition type: `next` set
 * over `existing`'s entry of its type (its transition time kept unless the
 * status changes), and no other entry, since applying another
 * controller's conditions would make this guest co-own them.
 */
export function ownedConditions(existing: readonly Condition[], next: Condition, nowMs: number | bigint): Condition[] {
  const mine = existing.filter((c) => c.type === next.type).map((c) => ({ ...c }));
  setCondition(mine, next, nowMs);
  return mine;
}

/** The condition fields, in the order {@link conditionPaths} lists them. */
export const CONDITION_FIELDS = ["type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"] as const;

/**
 * The projection paths of a conditions list at `prefix` (normally
 * `status.conditions`), one per condition field: `prefix[*].type`, ...
 */
export function conditionPaths(prefix: string): string[] {
  return CONDITION_FIELDS.map((f) => `${prefix}[*].${f}`);
}
