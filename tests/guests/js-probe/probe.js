// A probe guest in JavaScript, built with the public toolchains' default
// settings: the host's tests load it to prove that it loads, that the clocks read the reconcile's
// `env.now-ms`, that randomness is deterministic per request, and that an
// uncaught exception becomes a readable reconcile error.
//
// Configuration keys (all optional):
// - `name`: the guest's name (default `js-probe`);
// - `output`: a ConfigMap name in the host's namespace; each reconcile
//   applies it with what the guest read (key, clocks, random numbers);
// - `fail`: `describe` or `reconcile` makes that call throw an Error whose
//   message names it.

const KEY = "probe";

// QuickJS (jco's qjs backend) defines no `console`: the probe prints where
// its runtime can.
const out = typeof console !== "undefined" ? console : { log() {}, error() {} };

function config(env, key) {
  const found = env.config.find(([k]) => k === key);
  return found === undefined ? undefined : found[1];
}

function configmap() {
  return { group: "", version: "v1", kind: "ConfigMap" };
}

function failIn(what) {
  throw new Error(what);
}

export const reconciler = {
  describe(env) {
    out.log(`describe: namespace ${env.namespace}`);
    if (config(env, "fail") === "describe") {
      failIn("told to fail in describe");
    }
    const output = config(env, "output");
    const writes = output === undefined ? [] : [
      { gvk: configmap(), namespace: env.namespace, names: [output], status: false },
    ];
    return {
      name: config(env, "name") ?? "js-probe",
      watches: [{
        name: "watched",
        gvk: configmap(),
        plural: undefined,
        namespace: env.namespace,
        labelSelector: undefined,
        fieldSelector: undefined,
        fields: [],
        indexes: [],
        keys: { tag: "aggregate", val: KEY },
        finalizer: undefined,
      }],
      writes,
      resyncSeconds: undefined,
    };
  },

  reconcile(env, request, snapshot) {
    const key = request.key;
    const seen = snapshot.objectWatch.length;
    out.log(`reconcile ${key}: ${seen} objects`);
    out.error(`reconcile ${key}: to stderr`);
    if (config(env, "fail") === "reconcile") {
      failIn(`told to fail in reconcile of ${key}`);
    }
    // QuickJS has neither `crypto` nor `performance`.
    const bytes = new Uint8Array(8);
    const hasCrypto = typeof crypto !== "undefined";
    if (hasCrypto) crypto.getRandomValues(bytes);
    const monotonic = typeof performance !== "undefined" ? performance.now() : -1;
    const data = {
      key,
      objects: String(seen),
      "wall-ms": String(Date.now()),
      "monotonic-ms": String(Math.floor(monotonic)),
      random: hasCrypto ? Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("") : "none",
      "insecure-random": String(Math.floor(Math.random() * 2 ** 32)),
    };
    const output = config(env, "output");
    const writes = output === undefined ? [] : [{
      tag: "apply",
      val: JSON.stringify({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: output, namespace: env.namespace },
        data,
      }),
    }];
    return { writes, events: [], requeueAfterMs: undefined };
  },
};
