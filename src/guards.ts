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

/**
 * A plain object none of whose values is an object: most params (a steer, an interrupt). Read
 * with for-in, which allocates nothing, where the walk below makes a stack and a list per call
 * (every method call passes here; bench: http.steer.p50@1conn).
 */
function isFlatRecord(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) return false;
    const v: unknown = Reflect.get(value, key);
    if (typeof v === 'object' && v !== null) return false;
  }
  return true;
}

/**
 * Whether `value` nests arrays and objects deeper than `max` levels: walked without recursion, so
 * a hostile value 20,000 levels deep is measured, not a stack overflow.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (max > 0 && isFlatRecord(value)) return false;
  const stack: Array<[unknown, number]> = [[value, 0]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [v, depth] = top;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
  }
  return false;
}
