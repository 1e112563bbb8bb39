/// <reference path="../generated/controller.d.ts" preserve="true" />
/**
 * The contract's records (`wasmctrl:controller/types@0.3.0`), as jco's
 * guest-types generator declares them from `wit/controller.wit` (the
 * declarations in `generated/`, checked against the WIT by the tests).
 * Types only: nothing here exists at run time.
 *
 * Two runtimes lift them differently, and the SDK accepts both: jco's
 * declarations give 64-bit integers as `bigint` and integer lists as typed
 * arrays; componentize-qjs (the QuickJS backend) gives them as `number`s
 * and plain arrays.
 * @module
 */

export type * from "wasmctrl:controller/types@0.3.0";
export type { Level } from "wasmctrl:controller/log@0.3.0";
