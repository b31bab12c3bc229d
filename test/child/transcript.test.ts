import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TAIL_WINDOW_BYTES, Transcript } from '../../src/child/transcript.ts';

const enc = new TextEncoder();
// The reference decoder keeps a leading U+FEFF: it is text the child wrote, not a byte-order mark.
const dec = new TextDecoder('utf-8', { ignoreBOM: true });
const bytes = (s: string) => enc.encode(s).length;

/** What read(since) must return, computed from every byte ever written. */
function expected(all: Uint8Array, since?: number): { text: string; truncated: boolean; offset: number } {
  const end = all.length;
  const windowStart = Math.max(0, end - TAIL_WINDOW_BYTES);
  const asked = since === undefined ? 0 : Math.min(Math.max(0, Math.floor(since)), end);
  let start = Math.max(asked, windowStart);
  // The window may begin inside a character: drop its orphaned continuation bytes.
  let skipped = 0;
  while (start < end && skipped < 3 && ((all[start] ?? 0) & 0xc0) === 0x80) {
    start++;
    skipped++;
  }
  return { text: dec.decode(all.subarray(start, end)), truncated: asked < windowStart, offset: end };
}

function concat(parts: readonly string[]): Uint8Array {
  return enc.encode(parts.join(''));
}

describe('Transcript', () => {
  it('TAIL_WINDOW_BYTES is 16 KiB', () => {
    expect(TAIL_WINDOW_BYTES).toBe(16384);
  });

  it('an empty transcript reads empty at offset 0', () => {
    const t = new Transcript();
    expect(t.read()).toEqual({ text: '', truncated: false, offset: 0 });
    expect(t.offset).toBe(0);
  });

  it('an empty append changes nothing', () => {
    const t = new Transcript();
    t.append('');
    expect(t.read()).toEqual({ text: '', truncated: false, offset: 0 });
  });

  it('small writes come back whole, with offset counting UTF-8 bytes', () => {
    const t = new Transcript();
    t.append('hello ');
    t.append('wörld €');
    const r = t.read();
    expect(r.text).toBe('hello wörld €');
    expect(r.truncated).toBe(false);
    expect(r.offset).toBe(bytes('hello wörld €'));
    expect(r.offset).toBe(6 + 1 + 2 + 4 + 3);
  });

  it('text held before the first buffer reads as if each append was encoded apart: halves of a surrogate pair stay two replacement characters', () => {
    const t = new Transcript();
    t.append('a\uD83D');
    t.append('\uDE00b');
    t.appendNewline();
    expect(t.offset).toBe(1 + 3 + 3 + 1 + 1);
    expect(t.read().text).toBe('a\uFFFD\uFFFDb\n');
    // A read in between, then more writes, keep the byte order and the count.
    t.append('c');
    expect(t.read(9)).toEqual({ text: 'c', truncated: false, offset: 10 });
  });

  it('exactly 16384 bytes is not truncated', () => {
    const t = new Transcript();
    t.append('a'.repeat(16383));
    t.append('b');
    const r = t.read();
    expect(r.truncated).toBe(false);
    expect(r.text).toBe(`${'a'.repeat(16383)}b`);
    expect(r.offset).toBe(16384);
  });

  it('16385 bytes gives truncated and exactly the last 16384 bytes', () => {
    const t = new Transcript();
    t.append('X');
    t.append('a'.repeat(16383));
    t.append('Z');
    const r = t.read();
    expect(r.truncated).toBe(true);
    expect(r.offset).toBe(16385);
    expect(bytes(r.text)).toBe(16384);
    expect(r.text).toBe(`${'a'.repeat(16383)}Z`);
    expect(r.text.startsWith('X')).toBe(false);
  });

  it('many small writes past the window keep the newest bytes, in order', () => {
    const t = new Transcript();
    const lines: string[] = [];
    for (let i = 0; i < 3000; i++) {
      const line = `line ${i}\n`;
      lines.push(line);
      t.append(line);
    }
    const all = lines.join('');
    const r = t.read();
    expect(r.truncated).toBe(true);
    expect(r.offset).toBe(bytes(all));
    expect(bytes(r.text)).toBe(TAIL_WINDOW_BYTES);
    expect(all.endsWith(r.text)).toBe(true);
    expect(r.text.endsWith('line 2999\n')).toBe(true);
  });

  describe('multi-byte text at the cut', () => {
    // Every alignment of the window start relative to a 3-byte and a 4-byte character.
    for (const ch of ['€', '😀', 'é']) {
      const width = bytes(ch);
      for (let shift = 0; shift < width; shift++) {
        it(`${ch} (${width} bytes), window start shifted by ${shift}: valid UTF-8, no U+FFFD, at most 16384 bytes`, () => {
          const t = new Transcript();
          t.append('#'.repeat(shift));
          const body = ch.repeat(Math.ceil(20000 / width));
          t.append(body);
          const r = t.read();
          expect(r.truncated).toBe(true);
          expect(r.offset).toBe(shift + bytes(body));
          expect(bytes(r.text)).toBeLessThanOrEqual(TAIL_WINDOW_BYTES);
          expect(bytes(r.text)).toBeGreaterThan(TAIL_WINDOW_BYTES - width);
          expect(r.text).not.toContain('\uFFFD');
          expect(r.text.codePointAt(0)).toBe(ch.codePointAt(0));
          // Only whole characters, and they are the newest ones.
          expect(r.text).toBe(ch.repeat(r.text.length / ch.length));
          expect(r.text).toEqual(expected(enc.encode('#'.repeat(shift) + body)).text);
        });
      }
    }

    it('mixed ASCII, € and emoji across the cut decode as the reference says', () => {
      const t = new Transcript();
      const parts: string[] = [];
      for (let i = 0; i < 4000; i++) {
        const p = i % 3 === 0 ? '€a' : i % 3 === 1 ? '😀' : 'xy€😀';
        parts.push(p);
        t.append(p);
      }
      const r = t.read();
      const want = expected(concat(parts));
      expect(r).toEqual(want);
      expect(r.text.charCodeAt(0)).not.toBe(0xfffd);
      expect(concat(parts).length).toBeGreaterThan(TAIL_WINDOW_BYTES);
    });
  });

  it('keeps a leading U+FEFF the child wrote (it is text, not a byte-order mark)', () => {
    const t = new Transcript();
    t.append('\uFEFFhello');
    const r = t.read();
    expect(r.text).toBe('\uFEFFhello');
    expect(r.offset).toBe(8);
    // Read from `since` where the U+FEFF starts a slice too.
    const t2 = new Transcript();
    t2.append('ab');
    t2.append('\uFEFFc');
    expect(t2.read(2).text).toBe('\uFEFFc');
  });

  describe('since', () => {
    it('returns only the bytes written after the given offset', () => {
      const t = new Transcript();
      t.append('first\n');
      const { offset } = t.read();
      t.append('second\n');
      t.append('third\n');
      const r = t.read(offset);
      expect(r).toEqual({ text: 'second\nthird\n', truncated: false, offset: bytes('first\nsecond\nthird\n') });
    });

    it('since equal to the offset returns empty, not truncated', () => {
      const t = new Transcript();
      t.append('abc');
      expect(t.read(3)).toEqual({ text: '', truncated: false, offset: 3 });
    });

    it('since beyond the offset returns empty, not truncated, with the real offset', () => {
      const t = new Transcript();
      t.append('abc');
      expect(t.read(1000)).toEqual({ text: '', truncated: false, offset: 3 });
      t.append('x'.repeat(20000));
      expect(t.read(1_000_000)).toEqual({ text: '', truncated: false, offset: 20003 });
    });

    it('since 0 is the same as no since', () => {
      const t = new Transcript();
      t.append('hello');
      expect(t.read(0)).toEqual(t.read());
      t.append('y'.repeat(17000));
      expect(t.read(0)).toEqual(t.read());
    });

    it('a negative since is treated as 0', () => {
      const t = new Transcript();
      t.append('abc');
      expect(t.read(-5)).toEqual({ text: 'abc', truncated: false, offset: 3 });
    });

    it('since older than the window gives truncated and the whole window', () => {
      const t = new Transcript();
      t.append('a'.repeat(10000));
      t.append('b'.repeat(10000));
      const r = t.read(100);
      expect(r.truncated).toBe(true);
      expect(r.offset).toBe(20000);
      expect(r.text).toBe('a'.repeat(6384) + 'b'.repeat(10000));
    });

    it('since exactly at the window start is not truncated', () => {
      const t = new Transcript();
      t.append('a'.repeat(10000));
      t.append('b'.repeat(10000));
      const windowStart = 20000 - TAIL_WINDOW_BYTES;
      expect(t.read(windowStart).truncated).toBe(false);
      expect(t.read(windowStart - 1).truncated).toBe(true);
      expect(t.read(windowStart).text).toBe(t.read().text);
    });

    it('since inside the window returns only newer bytes', () => {
      const t = new Transcript();
      t.append('a'.repeat(10000));
      t.append('b'.repeat(10000));
      const r = t.read(15000);
      expect(r).toEqual({ text: 'b'.repeat(5000), truncated: false, offset: 20000 });
    });

    it('since in the middle of a multi-byte character skips its orphaned continuation bytes', () => {
      const t = new Transcript();
      t.append('€x');
      expect(t.read(1).text).toBe('x');
      expect(t.read(2).text).toBe('x');
      const t2 = new Transcript();
      t2.append('😀y');
      for (let s = 1; s <= 3; s++) expect(t2.read(s).text).toBe('y');
    });
  });

  describe('a single huge write', () => {
    it('keeps only the last window and counts every byte', () => {
      const t = new Transcript();
      const huge = `${'h'.repeat(100_000)}${'t'.repeat(100)}`;
      t.append(huge);
      const r = t.read();
      expect(r.offset).toBe(100_100);
      expect(r.truncated).toBe(true);
      expect(r.text).toBe(huge.slice(-TAIL_WINDOW_BYTES));
    });

    it('a huge write after small ones, then small writes after it', () => {
      const t = new Transcript();
      t.append('start\n');
      const huge = '0123456789'.repeat(5000);
      t.append(huge);
      t.append('end\n');
      const all = `start\n${huge}end\n`;
      const r = t.read();
      expect(r.offset).toBe(bytes(all));
      expect(r.text).toBe(all.slice(-TAIL_WINDOW_BYTES));
      expect(t.read(bytes(all) - 4)).toEqual({ text: 'end\n', truncated: false, offset: bytes(all) });
    });

    it('a huge multi-byte write is cut on a character boundary', () => {
      const t = new Transcript();
      const huge = '€😀'.repeat(10_000); // 7 bytes per pair
      t.append(huge);
      const r = t.read();
      expect(r).toEqual(expected(enc.encode(huge)));
      expect(r.text).not.toContain('\uFFFD');
      expect(huge.endsWith(r.text)).toBe(true);
    });

    it('a write of exactly the window size replaces everything', () => {
      const t = new Transcript();
      t.append('old');
      t.append('n'.repeat(TAIL_WINDOW_BYTES));
      const r = t.read();
      expect(r.text).toBe('n'.repeat(TAIL_WINDOW_BYTES));
      expect(r.truncated).toBe(true);
      expect(r.offset).toBe(TAIL_WINDOW_BYTES + 3);
    });
  });

  describe('against a reference (property)', () => {
    const piece = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.tuple(fc.constantFrom('a', 'é', '€', '😀', '\n', 'ab€'), fc.integer({ min: 1, max: 9000 })).map(([s, n]) => s.repeat(n)),
    );

    it('random-size writes: the window, the offset and truncated match the full history', () => {
      fc.assert(
        fc.property(fc.array(piece, { minLength: 1, maxLength: 40 }), (parts) => {
          const t = new Transcript();
          for (const p of parts) t.append(p);
          const all = concat(parts);
          const r = t.read();
          expect(r).toEqual(expected(all));
          expect(r.offset).toBe(all.length);
          expect(enc.encode(r.text).length).toBeLessThanOrEqual(TAIL_WINDOW_BYTES);
          expect(r.truncated).toBe(all.length > TAIL_WINDOW_BYTES);
          if (r.text.length > 0) expect(r.text.codePointAt(0)).not.toBe(0xfffd);
          // The text is a suffix of everything written.
          expect(parts.join('').endsWith(r.text)).toBe(true);
        }),
        { numRuns: 200 },
      );
    });

    it('reading with since at every past offset matches the reference', () => {
      fc.assert(
        fc.property(fc.array(piece, { minLength: 1, maxLength: 25 }), fc.array(fc.nat(), { maxLength: 5 }), (parts, extra) => {
          const t = new Transcript();
          const offsets: number[] = [];
          for (const p of parts) {
            offsets.push(t.offset);
            t.append(p);
          }
          const all = concat(parts);
          for (const since of [...offsets, ...extra.map((n) => n % (all.length + 100))]) {
            expect(t.read(since)).toEqual(expected(all, since));
          }
        }),
        { numRuns: 150 },
      );
    });

    it('reading between writes (polling with since) never loses or repeats a byte while within the window', () => {
      fc.assert(
        fc.property(fc.array(fc.string({ unit: 'binary', maxLength: 3000 }), { minLength: 1, maxLength: 30 }), (parts) => {
          const t = new Transcript();
          let since = 0;
          let collected = '';
          for (const p of parts) {
            t.append(p);
            const r = t.read(since);
            // Each write here is < 16 KiB, and we poll after each, so nothing is ever lost.
            expect(r.truncated).toBe(false);
            collected += r.text;
            since = r.offset;
          }
          expect(collected).toBe(parts.join(''));
        }),
        { numRuns: 150 },
      );
    });
  });
});
