"""A probe guest in Python, built with componentize-py's default settings
(no `--stub-wasi`): the host's tests load it to prove that a default build
loads, that print() reaches the guest log, that the clocks read the
reconcile's `env.now-ms`, that randomness is deterministic per request,
that an `import` inside `reconcile` works, and that an exception becomes
a readable reconcile error.

Configuration keys (all optional):
- `name`: the guest's name (default `py-probe`);
- `output`: a ConfigMap name in the host's namespace; each reconcile
  applies it with what the guest read (key, clocks, random numbers);
- `fail`: `describe` or `reconcile` makes that call raise an exception
  whose message names it; `import` makes reconcile import a module
  componentize-py did not bundle.
"""

# componentize-py bundles the modules imported while it builds the
# component (here, at the top); an import inside `reconcile` finds those,
# and any other module is a ModuleNotFoundError (`fail=import` shows it).
import json  # noqa: F401
import os
import random
import sys
import time

from wit_world import exports
from componentize_py_types import Err
from wit_world.imports import types

KEY = "probe"


def config(env: types.Environment, key: str):
    for k, v in env.config:
        if k == key:
            return v
    return None


def configmap() -> types.GroupVersionKind:
    return types.GroupVersionKind(group="", version="v1", kind="ConfigMap")


class Reconciler(exports.Reconciler):
    def describe(self, env: types.Environment) -> types.Manifest:
        print(f"describe: namespace {env.namespace}")
        if config(env, "fail") == "describe":
            raise ValueError("told to fail in describe")
        output = config(env, "output")
        writes = []
        if output is not None:
            writes.append(
                types.WriteRule(
                    gvk=configmap(), namespace=env.namespace, names=[output], status=False
                )
            )
        watch = types.Watch(
            name="watched",
            gvk=configmap(),
            plural=None,
            namespace=env.namespace,
            label_selector=None,
            field_selector=None,
            fields=[],
            indexes=[],
            keys=types.KeyMapping_Aggregate(KEY),
            finalizer=None,
        )
        return types.Manifest(
            name=config(env, "name") or "py-probe",
            watches=[watch],
            writes=writes,
            resync_seconds=None,
        )

    def reconcile(
        self, env: types.Environment, request: types.Request, snapshot: types.Snapshot
    ) -> types.Plan:
        # Imported here on purpose: an import inside reconcile must work.
        import json

        if config(env, "fail") == "import":
            import csv  # noqa: F401  (not bundled: never imported at build time)

        key = request.key
        seen = len(snapshot.object_watch)
        print(f"reconcile {key}: {seen} objects")
        print(f"reconcile {key}: to stderr", file=sys.stderr)
        if config(env, "fail") == "reconcile":
            raise ValueError(f"told to fail in reconcile of {key}")
        if config(env, "fail") == "retryable":
            raise Err(types.ReconcileError_Retryable(f"asked to retry {key}"))
        data = {
            "key": key,
            "objects": str(seen),
            "wall-ms": str(time.time_ns() // 1_000_000),
            "monotonic-ns": str(time.monotonic_ns()),
            "random": os.urandom(8).hex(),
            "insecure-random": str(random.Random(os.urandom(16)).getrandbits(32)),
        }
        writes = []
        output = config(env, "output")
        if output is not None:
            doc = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": output, "namespace": env.namespace},
                "data": data,
            }
            writes.append(types.Write_Apply(json.dumps(doc)))
        return types.Plan(writes=writes, events=[], requeue_after_ms=None)
