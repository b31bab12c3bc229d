// bearerOfHeader (src/server/auth.ts): the plain `Bearer T` header is read without a pattern; every
// header gives what the pattern `^bearer\s+` and a trim give, whatever its case and whitespace.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { bearerOfHeader } from '../../src/server/auth.ts';

function reference(auth: string): string | undefined {
  const scheme = /^bearer\s+/i.exec(auth);
  return scheme === null ? undefined : auth.slice(scheme[0].length).trim();
}

const scheme = fc.constantFrom('Bearer', 'bearer', 'BEARER', 'bEaReR', 'Bearer:', 'Basic', 'Bear', 'Bearerx', '');
const gap = fc.constantFrom('', ' ', '  ', '\t', ' \t', '\u00a0', '\n', ' \u00a0');
const token = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('tok', ' tok ', 'a b', ''));

describe('bearerOfHeader', () => {
  it('reads the token of the common header', () => {
    expect(bearerOfHeader('Bearer abc')).toBe('abc');
    expect(bearerOfHeader('bearer   abc  ')).toBe('abc');
    expect(bearerOfHeader('Bearer\tabc')).toBe('abc');
    expect(bearerOfHeader('Basic abc')).toBeUndefined();
    expect(bearerOfHeader('Bearerabc')).toBeUndefined();
  });

  it('agrees with the pattern on any scheme, gap and token', () => {
    fc.assert(
      fc.property(scheme, gap, token, (s, g, t) => {
        const auth = `${s}${g}${t}`;
        expect(bearerOfHeader(auth), JSON.stringify(auth)).toBe(reference(auth));
      }),
      { numRuns: 2000 },
    );
  });
});
