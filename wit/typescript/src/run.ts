/**
 * The {@link Guest} interface and the entry points that run it: what the
 * component's exports do ({@link exportGuest}) and what native tests call
 * ({@link describe}, {@link reconcile}), so both take the same path —
 * describe, resolve the fields against the manifest, check the snapshot,
 * reconcile, finish the plan. Failures the SDK finds are errors naming the
 * guest; an exception the guest's own code throws (other than a
 * {@link ReconcileError}) propagates unchanged, for the host to report.
 * @module
 */

import { ReconcileError } from "./errors.js";
import { type LogSink, setLogSink } from "./log.js";
import type { SnapshotData } from "./layout.js";
import { Schema, Snapshot } from "./snapshot.js";
import type * as wit from "./wit.js";
import type { Plan } from "./plan.js";

/**
 * A controller guest. `describe` declares what it reads and writes;
 * `fields` resolves, by name, everything `reconcile` reads (an unknown
 * watch or field throws at `describe`, naming the guest); `reconcile`
 * computes a {@link Plan}. All three must be pure functions of their
 * arguments: the SDK calls `describe` and `fields` before every reconcile.
 */
export interface Guest<F> {
  describe(env: wit.Environment): wit.Manifest;
  fields(env: wit.Environment, schema: Schema): F;
  reconcile(env: wit.Environment, request: wit.Request, snapshot: Snapshot, fields: F): Plan;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function resolve<F>(guest: Guest<F>, env: wit.Environment, manifest: wit.Manifest): [Schema, F] {
  try {
    const schema = new Schema(manifest);
    return [schema, guest.fields(env, schema)];
  } catch (e) {
    throw new Error(`guest ${manifest.name}: ${message(e)}`);
  }
}

/**
 * `describe` as the component exports it: the manifest, checked by
 * resolving the guest's fields (an unknown name fails now, not at the
 * first reconcile). Throws an Error with the reason otherwise.
 */
export function describe<F>(guest: Guest<F>, env: wit.Environment): wit.Manifest {
  const manifest = guest.describe(env);
  resolve(guest, env, manifest);
  return manifest;
}

/**
 * `reconcile` as the component exports it; throws a {@link ReconcileError}
 * (terminal, naming the guest) when describing or resolving fails, the
 * request names a watch the manifest lacks or the snapshot is malformed.
 */
export function reconcile<F>(
  guest: Guest<F>,
  env: wit.Environment,
  request: wit.Request,
  data: wit.Snapshot | SnapshotData,
): wit.Plan {
  let manifest: wit.Manifest;
  try {
    manifest = guest.describe(env);
  } catch (e) {
    throw ReconcileError.terminal(message(e));
  }
  let schema: Schema;
  let fields: F;
  try {
    [schema, fields] = resolve(guest, env, manifest);
  } catch (e) {
    throw ReconcileError.terminal(message(e));
  }
  const named = (m: string) => ReconcileError.terminal(`guest ${manifest.name}: ${m}`);
  if (request.watch != null && !schema.watches.some((w) => w.name === request.watch)) {
    throw named(`request ${JSON.stringify(request.key)}: no watch named ${JSON.stringify(request.watch)}`);
  }
  let snapshot: Snapshot;
  try {
    snapshot = Snapshot.of(schema, data);
  } catch (e) {
    throw named(message(e));
  }
  return guest.reconcile(env, request, snapshot, fields).finish();
}

/** The contract's `reconciler` export, with its error conventions. */
export interface Reconciler {
  describe(env: wit.Environment): wit.Manifest;
  reconcile(env: wit.Environment, request: wit.Request, snapshot: wit.Snapshot): wit.Plan;
}

/**
 * `guest` as the component's `reconciler` export, for the entry module:
 *
 * ```ts
 * import * as log from "wasmctrl:controller/log@0.3.0";
 * export const reconciler = exportGuest(new AppController(), log.log);
 * ```
 *
 * Log lines go to `log`. Where the runtime has no `console` (QuickJS
 * under componentize-qjs), a `console` is installed that writes to the
 * guest's log too: `console.log`/`info` at info, `debug` at debug,
 * `warn`/`error` at warn (as stdout and stderr land). A failed `describe` throws its message (the
 * contract's `result<manifest, string>` error); a {@link ReconcileError}
 * is thrown as the contract's `{tag, val}`; any other exception propagates.
 * 64-bit integers in the plan take the runtime's representation (that of
 * `env.nowMs`: `bigint` for jco, `number` for componentize-qjs).
 */
export function exportGuest<F>(guest: Guest<F>, log?: LogSink): Reconciler {
  if (log) {
    setLogSink(log);
    installConsole(log);
  }
  return {
    describe(env) {
      try {
        return describe(guest, env);
      } catch (e) {
        throw message(e);
      }
    },
    reconcile(env, request, snapshot) {
      let plan: wit.Plan;
      try {
        plan = reconcile(guest, env, request, snapshot);
      } catch (e) {
        if (e instanceof ReconcileError) throw { tag: e.kind, val: e.message };
        throw e;
      }
      if (plan.requeueAfterMs !== undefined && typeof env.nowMs !== "bigint") {
        (plan as { requeueAfterMs?: unknown }).requeueAfterMs = Number(plan.requeueAfterMs);
      }
      return plan;
    },
  };
}

/** One console argument as text. */
function text(value: unknown): string {
  if (typeof value === "string") return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    const json = JSON.stringify(value);
    return json === undefined ? String(value) : json;
  } catch {
    return String(value);
  }
}

/** A `console` writing to `log`, where the runtime has none. */
function installConsole(log: LogSink): void {
  const g = globalThis as { console?: unknown };
  if (typeof g.console !== "undefined") return;
  const at = (level: wit.Level) => (...args: unknown[]) => log(level, args.map(text).join(" "));
  g.console = {
    log: at("info"),
    info: at("info"),
    debug: at("debug"),
    trace: at("trace"),
    warn: at("warn"),
    error: at("warn"),
  };
}
