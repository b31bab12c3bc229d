// "Did you mean": the nearest known name to a slip, for the CLI's options and commands and the
// library's option objects alike.

/**
 * The candidate nearest to `word` by edit distance, if it is near enough to be a slip (at most a
 * third of its length, and at most 2), or the one candidate `word` begins (`--prot` -> `--port`).
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = distance(word, c);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  if (best !== undefined && bestDistance <= Math.min(2, Math.ceil(word.length / 3))) return best;
  const prefixed = word.length >= 3 ? candidates.filter((c) => c.startsWith(word)) : [];
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

/** Levenshtein distance, two rows. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/**
 * Throws a TypeError naming the first key of `given` that `known` does not have (and the known one
 * it was near): an option object from JavaScript is held to the names the types declare.
 */
export function refuseUnknownKeys(what: string, given: object, known: Readonly<Record<string, true>>): void {
  const names = Object.keys(known);
  for (const key of Object.keys(given)) {
    if (key in known) continue;
    const near = closest(key, names);
    throw new TypeError(`${what}: unknown option ${key}${near === undefined ? '' : ` (did you mean ${near}?)`}`);
  }
}
