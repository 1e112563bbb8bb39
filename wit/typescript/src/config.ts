/**
 * The operator's configuration for a guest (`env.config`), checked: every
 * key must be one the guest knows and no value may be empty, so a typo is
 * an error at `describe` naming the key instead of a silently ignored setting.
 * @module
 */

import type * as wit from "./wit.js";

/** A checked view of `env.config`. */
export class Config {
  constructor(private readonly entries: ReadonlyArray<readonly [string, string]>) {}

  /** The value of `key` (the last one, if given twice). */
  get(key: string): string | undefined {
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const entry = this.entries[i];
      if (entry && entry[0] === key) return entry[1];
    }
    return undefined;
  }

  /** The value of `key`, or `fallback`. */
  getOr(key: string, fallback: string): string {
    return this.get(key) ?? fallback;
  }
}

/**
 * The configuration, if every key is in `known` and no value is empty;
 * otherwise throws an Error naming the offending key (and the known ones).
 */
export function settings(env: wit.Environment, known: readonly string[]): Config {
  for (const [key, value] of env.config) {
    if (!known.includes(key)) {
      const list = known.length ? known.join(", ") : "none";
      throw new Error(`unknown configuration key ${JSON.stringify(key)} (known: ${list})`);
    }
    if (value === "") throw new Error(`configuration key ${JSON.stringify(key)} must not be empty`);
  }
  return new Config(env.config);
}
