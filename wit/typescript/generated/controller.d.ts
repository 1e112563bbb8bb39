/// <reference path="./interfaces/wasmctrl-controller-log.d.ts" />
/// <reference path="./interfaces/wasmctrl-controller-reconciler.d.ts" />
/// <reference path="./interfaces/wasmctrl-controller-types.d.ts" />
declare module 'wasmctrl:controller/controller@0.3.0' {
  export type * as WasmctrlControllerLog030 from 'wasmctrl:controller/log@0.3.0'; // import wasmctrl:controller/log@0.3.0
  export type * as WasmctrlControllerTypes030 from 'wasmctrl:controller/types@0.3.0'; // import wasmctrl:controller/types@0.3.0
  export * as reconciler from 'wasmctrl:controller/reconciler@0.3.0'; // export wasmctrl:controller/reconciler@0.3.0
}
