declare module 'wasmctrl:controller/log@0.3.0' {
  /**
   * Write one log line.
   */
  export function log(level: Level, message: string): void;
  /**
   * Severity.
   * # Variants
   * 
   * ## `"trace"`
   * 
   * Very detailed tracing.
   * ## `"debug"`
   * 
   * Debugging detail.
   * ## `"info"`
   * 
   * Normal operation.
   * ## `"warn"`
   * 
   * Something unexpected but handled.
   * ## `"error"`
   * 
   * Something failed.
   */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}
