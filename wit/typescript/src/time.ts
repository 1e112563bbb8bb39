/**
 * The host's clock as Kubernetes writes it: `env.nowMs` (milliseconds since
 * the Unix epoch, UTC) as RFC 3339 with whole seconds
 * (`2026-12-01T03:44:00Z`), the form `metav1.Time` serialises to. No clock
 * is read here (a guest has none).
 * @module
 */

/** `ms` after the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`, sub-seconds dropped. */
export function rfc3339(ms: number | bigint): string {
  const whole = Math.floor(Number(ms) / 1000) * 1000;
  return new Date(whole).toISOString().replace(/\.\d{3}Z$/, "Z");
}
