// The route matcher against the plainest matcher there is: split the path on '/', try every route
// in table order, first match wins. Paths and tables are drawn from a few segments, so literal
// and parameter routes of the same length compete, empty segments and extra slashes occur, and
// a path may be longer than any route.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { compile, type Matched, type Params, type Route } from '../../src/http/route-table.ts';

const LITERALS = ['v1', 'sessions', 'subagents', 'steer', 'tail'];
const PARAMS = [':sid', ':cid', ':did'];

function reference(routes: readonly Route[], pathname: string): Matched | undefined {
  if (!pathname.startsWith('/')) return undefined;
  const segments = pathname.slice(1).split('/');
  for (const route of routes) {
    if (route.path.length !== segments.length) continue;
    const params: Record<string, string | undefined> = { sid: undefined, cid: undefined, did: undefined };
    const matches = route.path.every((p, i) => {
      const s = segments[i] ?? '';
      if (!p.startsWith(':')) return p === s;
      params[p.slice(1)] = s;
      return s !== '';
    });
    if (!matches) continue;
    const filled: Params = { sid: params.sid, cid: params.cid, did: params.did };
    const template = `/${route.path.map((p) => (p.startsWith(':') ? `{${p.slice(1)}}` : p)).join('/')}`;
    return { route, template, params: filled };
  }
  return undefined;
}

const routeArb = fc.array(fc.constantFrom(...LITERALS, ...PARAMS), { minLength: 1, maxLength: 6 }).map((path): Route => ({ path, methods: {} }));
const segmentArb = fc.oneof(fc.constantFrom(...LITERALS, '', 'se_1', 'sa-2', 'steers', 'stee'), fc.stringMatching(/^[a-z_]{0,4}$/));
const pathArb = fc.oneof(
  fc.array(segmentArb, { minLength: 0, maxLength: 9 }).map((s) => `/${s.join('/')}`),
  fc.string({ maxLength: 12 }),
);

describe('compile (property)', () => {
  it('matches what splitting the path and trying each route in order matches', () => {
    fc.assert(
      fc.property(fc.array(routeArb, { minLength: 0, maxLength: 8 }), fc.array(pathArb, { minLength: 1, maxLength: 10 }), (routes, paths) => {
        const match = compile(routes);
        for (const path of paths) expect(match(path), path).toEqual(reference(routes, path));
      }),
      { numRuns: 500 },
    );
  });

  it('matches a path of table routes with their parameters filled', () => {
    fc.assert(
      fc.property(fc.array(routeArb, { minLength: 1, maxLength: 8 }), fc.nat(), (routes, pick) => {
        const route = routes[pick % routes.length];
        if (route === undefined) return;
        const path = `/${route.path.map((p, i) => (p.startsWith(':') ? `x${i}` : p)).join('/')}`;
        const found = compile(routes)(path);
        expect(found).toEqual(reference(routes, path));
        expect(found).toBeDefined();
      }),
    );
  });
});
