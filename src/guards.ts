// Narrowing at the edges: checks that tell the compiler what a value read from outside (JSON, a
// thrown error, a handler's answer) really is, so no `as` has to claim it.

/** A plain JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Anything `await` would wait for (a Promise or any other thenable). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && 'then' in value && typeof value.then === 'function';
}

/** The `code` a Node error carries (`ENOENT`, `EPIPE`, ...), if it has one. */
export function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}
