/**
 * The App decision, as plain functions: the data of the child ConfigMap an
 * App should have, and the status the App should show. No snapshot, no
 * plan, no I/O: the glue in `guest.ts` reads the snapshot (the view `App`),
 * calls these and writes the results.
 * @module
 */

import { type Condition, condition, conditionJSON, isConditionTrue, ownedConditions } from "wasmctrl-guest-sdk";

/** The condition type this controller owns. */
export const READY = "Ready";
/** The reason of `Ready=True`: the child exists. */
export const CHILD_READY = "ChildReady";
/** The reason of `Ready=False`: the child is not there (yet); this reconcile's plan creates it. */
export const CHILD_MISSING = "ChildMissing";

/** What the decision reads of an App's spec. */
export interface AppSpec {
  message?: string | undefined;
  replicas?: number | undefined;
}

/**
 * The child's `data`: `banner` from the namespace's `shared-settings`,
 * `message` and `replicas` (a decimal string) from the App's spec, keys in
 * sorted order; a value that is absent has no key, so the child tells
 * "no banner" apart from an empty one.
 */
export function childData(spec: AppSpec, banner: string | undefined): Record<string, string> {
  const data: Record<string, string> = {};
  if (banner !== undefined) data.banner = banner;
  if (spec.message !== undefined) data.message = spec.message;
  if (spec.replicas !== undefined) data.replicas = String(spec.replicas);
  return data;
}

/** `status` of an App, in the CRD's field names. */
export interface AppStatus {
  /** The generation this status was computed from. */
  observedGeneration: number;
  /** Only the conditions this controller owns (`Ready`). */
  conditions: Condition[];
}

/** Whether `Ready` is `True`. */
export function isReady(status: AppStatus): boolean {
  return isConditionTrue(status.conditions, READY);
}

/**
 * The status of an App at `generation` whose child `child` names
 * (`namespace/name`) does or does not exist yet, keeping the
 * `lastTransitionTime` of the `Ready` condition in `existing` unless its
 * status flips (`nowMs` stamps a flip).
 */
export function status(
  generation: number,
  child: string,
  childExists: boolean,
  existing: readonly Condition[],
  nowMs: number | bigint,
): AppStatus {
  const ready = childExists
    ? condition(READY, true, CHILD_READY, `ConfigMap ${child} is applied`, generation)
    : condition(READY, false, CHILD_MISSING, `ConfigMap ${child} does not exist yet`, generation);
  return { observedGeneration: generation, conditions: ownedConditions(existing, ready, nowMs) };
}

/** The status as the CRD's JSON. */
export function statusJSON(s: AppStatus): Record<string, unknown> {
  return { observedGeneration: s.observedGeneration, conditions: s.conditions.map(conditionJSON) };
}
