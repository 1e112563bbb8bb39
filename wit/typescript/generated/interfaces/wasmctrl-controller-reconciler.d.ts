/// <reference path="./wasmctrl-controller-types.d.ts" />
declare module 'wasmctrl:controller/reconciler@0.3.0' {
  /**
   * Declare what the guest watches and writes (its manifest). Must be
   * deterministic in `env`. An error rejects the guest with that message.
   */
  export function describe(env: Environment): Manifest;
  /**
   * Compute the desired state for `request` from `snapshot`.
   * 
   * For an aggregate key the snapshot holds every watched object. For a
   * primary object's key it holds that object and only the objects its
   * manifest relates to it (`owner`, `same-namespace`, `by-index`,
   * `all`), so its cost does not grow with the world. When the request's
   * `presence` is `gone` or `unselected` the snapshot does not hold the
   * primary but still holds the objects related to it, computed from
   * the last state of the primary the host saw (the objects whose
   * controller owner reference has its uid, its namespace's objects,
   * the objects matching its last index values, every object of an
   * `all` watch), so the guest can see and delete what it controls.
   * When the host never saw the primary leave (it left while no host
   * ran), an `unselected` key's last state is the server's copy of the
   * primary; a `gone` key relates the objects whose controller owner
   * reference names the primary's kind, group, name and (when it is
   * namespaced) namespace, whatever their uid, the objects of the
   * namespace its key stands for, and every object of an `all` watch
   * (nothing through `by-index`: its index values are unknown).
   * 
   * Pure: the result depends only on the arguments. The guest's WASI
   * clocks read `env.now-ms`, its randomness is seeded from the request
   * (deterministic, not for secrets), its filesystem has no directory
   * and every socket operation is denied; a component that imports
   * `wasi:http` is refused at load. A call may run on a fresh instance
   * or on one that served earlier calls of the same guest and
   * environment: nothing kept in memory between calls may change a
   * result.
   */
  export function reconcile(env: Environment, request: Request, snapshot: Snapshot): Plan;
  export type Environment = import('wasmctrl:controller/types@0.3.0').Environment;
  export type Manifest = import('wasmctrl:controller/types@0.3.0').Manifest;
  export type Request = import('wasmctrl:controller/types@0.3.0').Request;
  export type Snapshot = import('wasmctrl:controller/types@0.3.0').Snapshot;
  export type Plan = import('wasmctrl:controller/types@0.3.0').Plan;
  export type ReconcileError = import('wasmctrl:controller/types@0.3.0').ReconcileError;
}
