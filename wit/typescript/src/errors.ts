/**
 * The failures a guest returns: {@link ReconcileError} (retryable or
 * terminal, the contract's `reconcile-error`). Any other exception is a
 * bug in the guest: the SDK lets it propagate (the host reports its
 * message and stack), it never turns it into a plan.
 * @module
 */

/** Why a reconcile failed, as the contract's `reconcile-error`. */
export class ReconcileError extends Error {
  override name = "ReconcileError";

  constructor(
    /** `retryable`: the host retries with backoff; `terminal`: not until the key changes. */
    readonly kind: "retryable" | "terminal",
    message: string,
  ) {
    super(message);
  }

  /** A transient problem: the host retries the key with backoff. */
  static retryable(message: string): ReconcileError {
    return new ReconcileError("retryable", message);
  }

  /** The input can never succeed: reported, not retried until the key changes. */
  static terminal(message: string): ReconcileError {
    return new ReconcileError("terminal", message);
  }
}
