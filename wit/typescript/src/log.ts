/**
 * Logging that reaches the host's structured log (the contract's `log`
 * import, with the guest name and request key attached) inside a
 * component, and stderr natively: `log.info("...")`. The component's entry
 * module hands the import to {@link exportGuest}; nothing here imports it,
 * so the same code runs under `node --test`.
 * @module
 */

import type * as wit from "./wit.js";

/** Where log lines go: the contract's `log` function. */
export type LogSink = (level: wit.Level, message: string) => void;

let sink: LogSink = (level, message) => {
  if (typeof console !== "undefined") console.error(`[${level}] ${message}`);
};

/** Routes every later log line to `next` (what `exportGuest` does with the import). */
export function setLogSink(next: LogSink): void {
  sink = next;
}

/** Writes one line at `level`. */
export function write(level: wit.Level, message: string): void {
  sink(level, message);
}

export const trace = (message: string) => write("trace", message);
export const debug = (message: string) => write("debug", message);
export const info = (message: string) => write("info", message);
export const warn = (message: string) => write("warn", message);
export const error = (message: string) => write("error", message);
