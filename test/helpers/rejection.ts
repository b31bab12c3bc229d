// The rejection of a promise that must reject: a test reads what it was rejected with.
import { expect } from 'vitest';

export async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.unreachable('expected a rejection'),
    (err: unknown) => err,
  );
}
