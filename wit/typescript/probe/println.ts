// A probe guest for the host's tests (make guests-js builds it into
// target/guests-js/probe_println_ts.wasm): prints with console.log and
// console.error in describe and reconcile, and throws an uncaught
// TypeError where its configuration says (`throw=describe` or
// `throw=reconcile`), so the tests see what reaches the guest log and the
// reconcile error. Configuration `name` names the guest.
import * as log from "wasmctrl:controller/log@0.3.0";

import { Manifest, Plan, Watch, core, exportGuest, settings, type Guest } from "../src/index.js";

const KEYS = ["name", "throw"];

const Probe: Guest<null> = {
  describe(env) {
    const config = settings(env, KEYS);
    console.log(`describe: namespace ${env.namespace}`);
    if (config.get("throw") === "describe") throw new TypeError("told to throw in describe");
    return new Manifest(config.getOr("name", "probe-ts")).watch(new Watch("maps", core("ConfigMap")).perObject());
  },
  fields: () => null,
  reconcile(env, request, snapshot) {
    console.log(`reconcile ${request.key}: ${snapshot.length} objects`);
    console.error(`reconcile ${request.key}: to stderr`);
    if (settings(env, KEYS).get("throw") === "reconcile") {
      throw new TypeError(`told to throw in reconcile of ${request.key}`);
    }
    return new Plan();
  },
};

export const reconciler = exportGuest(Probe, log.log);
