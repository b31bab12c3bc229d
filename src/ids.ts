// Id makers behind a small interface, so tests can inject deterministic ids.
import { randomFillSync } from 'node:crypto';

export interface IdMaker {
  subagent(): string;
  delegation(): string;
  steer(): string;
  session(): string;
}

// Lower-case alphanumerics: ids stay readable in a terminal and safe in URLs and file names.
const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';
const CODES = Array.from(ALPHABET, (c) => c.charCodeAt(0));
/** Bytes at or above this are drawn again, so every character is equally likely (252 = 7 * 36). */
const CUTOFF = 256 - (256 % ALPHABET.length);
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafeSlow(POOL_BYTES);
let at = POOL_BYTES;

/** One character of the alphabet, uniformly, from the CSPRNG's pool. */
function char(): number {
  for (;;) {
    if (at === POOL_BYTES) {
      randomFillSync(pool);
      at = 0;
    }
    const b = pool[at++] ?? CUTOFF;
    if (b < CUTOFF) return CODES[b % ALPHABET.length] ?? 0;
  }
}

/**
 * A three-character prefix and 12 random characters, made as one flat string: a template literal
 * would make a rope (a cons string) that every Map lookup by id flattens again, and nanoid built
 * each id through 12 intermediate strings and a view of its pool (bench: delegation.per_child).
 */
function id3(prefix: string): string {
  return String.fromCharCode(
    prefix.charCodeAt(0),
    prefix.charCodeAt(1),
    prefix.charCodeAt(2),
    char(),
    char(),
    char(),
    char(),
    char(),
    char(),
    char(),
    char(),
    char(),
    char(),
    char(),
    char(),
  );
}

export const randomIds: IdMaker = {
  subagent: () => id3('sa_'),
  delegation: () => id3('dg_'),
  steer: () => id3('st_'),
  // Rare (one per session): the prefix is four characters.
  session: () => `s${id3('es_')}`,
};

/** Deterministic ids (`sa_1`, `sa_2`, ...) for tests and reproducible demos. */
export function counterIds(): IdMaker {
  let n = 0;
  return {
    subagent: () => `sa_${++n}`,
    delegation: () => `dg_${++n}`,
    steer: () => `st_${++n}`,
    session: () => `ses_${++n}`,
  };
}
