// sameText (src/server/auth.ts): the constant-time comparison a keep-alive connection's bearer is
// checked with against what it proved. It must answer exactly as === does, for any strings.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sameText } from '../../src/server/auth.ts';

describe('sameText', () => {
  it('answers as === for any two strings, and for a string and its one-unit edits', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (a, b) => {
        expect(sameText(a, b)).toBe(a === b);
        expect(sameText(a, a)).toBe(true);
        if (a.length > 0) {
          const i = b.length % a.length;
          const edited = a.slice(0, i) + String.fromCharCode(a.charCodeAt(i) ^ 1) + a.slice(i + 1);
          expect(sameText(a, edited)).toBe(false);
        }
      }),
    );
  });

  it('tells apart a prefix, a last unit and a surrogate half', () => {
    expect(sameText('token-abc', 'token-ab')).toBe(false);
    expect(sameText('token-abc', 'token-abd')).toBe(false);
    expect(sameText('\u{1F600}', '\uD83D\uDE01')).toBe(false);
    expect(sameText('', '')).toBe(true);
  });
});
