// The route matcher (src/http/route-table.ts): literal segments match themselves, a parameter any
// non-empty segment, and the parameters come back by name whatever the route.
import { describe, expect, it } from 'vitest';
import { compile, type Route } from '../../src/http/route-table.ts';

const route = (...path: string[]): Route => ({ path, methods: {} });
const sessions = route('v1', 'sessions');
const session = route('v1', 'sessions', ':sid');
const steer = route('v1', 'sessions', ':sid', 'subagents', ':cid', 'steer');
const delegation = route('v1', 'sessions', ':sid', 'delegations', ':did');
const match = compile([sessions, session, steer, delegation]);

describe('compile', () => {
  it('matches literals and fills the named parameters, the others undefined', () => {
    expect(match('/v1/sessions')).toEqual({ route: sessions, template: '/v1/sessions', params: { sid: undefined, cid: undefined, did: undefined } });
    expect(match('/v1/sessions/se_1/subagents/sa_2/steer')).toEqual({
      route: steer,
      template: '/v1/sessions/{sid}/subagents/{cid}/steer',
      params: { sid: 'se_1', cid: 'sa_2', did: undefined },
    });
    expect(match('/v1/sessions/se_1/delegations/dl_3')?.params).toEqual({ sid: 'se_1', cid: undefined, did: 'dl_3' });
    expect(match('/v1/sessions/se_1')?.route).toBe(session);
  });

  it('matches nothing for an empty parameter, a trailing slash, another literal or length, or no leading slash', () => {
    for (const path of [
      '/v1/sessions//subagents/sa_2/steer',
      '/v1/sessions/',
      '/v1/sessions/se_1/subagents/sa_2/stir',
      '/v1/sessions/se_1/subagents',
      'v1/sessions',
      '',
      '/',
    ]) {
      expect(match(path), path).toBeUndefined();
    }
  });

  it('refuses a table whose route names a parameter no handler reads', () => {
    expect(() => compile([route('v1', ':nope')])).toThrow(/unknown parameter :nope/);
  });
});
