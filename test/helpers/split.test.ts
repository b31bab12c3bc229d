// The test clients' stream splitters (test/helpers/split.ts): whatever the chunking, they give the
// pieces a split of the whole stream gives, in order, and the bytes version never cuts a character.
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { splitLines, splitOn } from '../helpers/split.ts';

/** A text cut into chunks at the given points. */
const chunked = (text: string, cuts: number[]): string[] => {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const out: string[] = [];
  let from = 0;
  for (const c of [...at, text.length]) {
    out.push(text.slice(from, c));
    from = c;
  }
  return out;
};

it('splits on a separator across any chunking as one split of the whole does', () => {
  fc.assert(
    fc.property(
      fc.constantFrom('\n\n', '\n', 'ab'),
      fc.array(fc.constantFrom('a', 'b', '\n', 'x', 'é'), { maxLength: 60 }).map((cs) => cs.join('')),
      fc.array(fc.nat(), { maxLength: 12 }),
      (sep, text, cuts) => {
        const got: string[] = [];
        const feed = splitOn(sep, (p) => got.push(p));
        for (const c of chunked(text, cuts)) feed(c);
        // The whole split, less what follows the last separator (still pending).
        expect(got).toEqual(text.split(sep).slice(0, -1));
      },
    ),
    { numRuns: 2000 },
  );
});

it('splits bytes on LF across any chunking, decoding each line whole', () => {
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom('a', '\n', 'é', '😀', '\r'), { maxLength: 40 }).map((cs) => cs.join('')),
      fc.array(fc.nat(), { maxLength: 12 }),
      (text, cuts) => {
        const bytes = Buffer.from(text, 'utf8');
        const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const got: string[] = [];
        const lines = splitLines((l) => got.push(l));
        let from = 0;
        for (const c of [...at, bytes.length]) {
          lines.push(bytes.subarray(from, c));
          from = c;
        }
        const whole = text.split('\n');
        expect(got).toEqual(whole.slice(0, -1));
        const last = whole.at(-1);
        expect(lines.rest()).toBe(last === '' ? undefined : last);
      },
    ),
    { numRuns: 2000 },
  );
});
