// The shape of a /v1/ route (routes.ts builds the table) and the matcher every request runs
// against it: kept apart so the table's file holds only the translations.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ListenerContext } from '../server/listener.ts';
import type { Answer } from './respond.ts';

/** What a handler reads of a request's query. */
export interface Query {
  get(name: string): string | null;
}

/** A target with no query (a plain path): one shared value, nothing to read. */
export const NO_QUERY: Query = Object.freeze({ get: () => null });

/** What a handler reads of the request target: a URL, or a plain path's own (api.ts). */
export interface Target {
  readonly pathname: string;
  readonly searchParams: Query;
}

/** The path parameters a route may name (`{sid}`, `{cid}`, `{did}`): one shape for every route. */
export interface Params {
  readonly sid: string | undefined;
  readonly cid: string | undefined;
  readonly did: string | undefined;
}
export type ParamName = keyof Params;
const PARAM_NAMES: readonly string[] = ['sid', 'cid', 'did'] satisfies ParamName[];
const isParamName = (s: string): s is ParamName => PARAM_NAMES.includes(s);

export interface Call {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly ctx: ListenerContext;
  readonly url: Target;
  readonly params: Params;
  readonly body: Record<string, unknown>;
}

/** An answer, or `streamed` when the handler wrote the response itself (the event stream). */
export type Handler = (call: Call) => Answer | 'streamed' | Promise<Answer | 'streamed'>;

export interface Route {
  /** Its segments: a literal, or `:name` for a parameter (one of Params). */
  readonly path: readonly string[];
  readonly methods: Readonly<Partial<Record<'GET' | 'POST' | 'DELETE', Handler>>>;
  /** An event stream: long-lived, so no request span. */
  readonly stream?: boolean;
}

/** A route made ready to match: each segment's literal, or the parameter it fills. */
interface Compiled {
  readonly route: Route;
  readonly template: string;
  readonly literals: readonly (string | undefined)[];
  readonly names: readonly (ParamName | undefined)[];
}

/** A matched route, its template as docs/http.md writes it (`/v1/sessions/{sid}/subagents/{cid}/steer`) and its parameters. */
export interface Matched {
  readonly route: Route;
  readonly template: string;
  readonly params: Params;
}

export type Matcher = (pathname: string) => Matched | undefined;

/**
 * The matcher of a table. The path is read in place: its segments' bounds are found once, a
 * literal is compared where it stands, and only the matched route's parameters are cut out, into
 * one fixed-shape object, so a request neither splits its path nor makes a dictionary (bench:
 * http.steer.p50@1conn). Only routes of the path's segment count are tried, in table order (the
 * first that matches wins). A parameter matches any non-empty segment, a literal itself.
 */
export function compile(routes: readonly Route[]): Matcher {
  const table: Compiled[] = routes.map((route) => {
    const names = route.path.map((s) => {
      if (!s.startsWith(':')) return undefined;
      const name = s.slice(1);
      if (!isParamName(name)) throw new Error(`route ${route.path.join('/')}: unknown parameter ${s}`);
      return name;
    });
    return {
      route,
      template: `/${route.path.map((s) => (s.startsWith(':') ? `{${s.slice(1)}}` : s)).join('/')}`,
      names,
      literals: route.path.map((s, i) => (names[i] === undefined ? s : undefined)),
    };
  });
  // The routes by their segment count, each list in table order.
  const byCount: Compiled[][] = [];
  for (const c of table) (byCount[c.literals.length] ??= []).push(c);
  const most = byCount.length - 1;
  // Segment i is path[starts[i], ends[i]); reused by every call (a match runs to its end in one step).
  const starts: number[] = [];
  const ends: number[] = [];
  const segment = (path: string, i: number): string => path.slice(starts[i], ends[i]);
  return (pathname) => {
    if (pathname.charCodeAt(0) !== 47 /* '/' */) return undefined;
    let n = 0;
    for (let slash = 0; slash !== -1; n++) {
      // More segments than any route has: nothing matches, however long the path goes on.
      if (n === most) return undefined;
      starts[n] = slash + 1;
      slash = pathname.indexOf('/', slash + 1);
      ends[n] = slash === -1 ? pathname.length : slash;
    }
    const candidates = byCount[n];
    if (candidates === undefined) return undefined;
    outer: for (const c of candidates) {
      for (let i = 0; i < n; i++) {
        const literal = c.literals[i];
        const length = (ends[i] ?? 0) - (starts[i] ?? 0);
        if (literal === undefined ? length === 0 : length !== literal.length || !pathname.startsWith(literal, starts[i])) continue outer;
      }
      let sid: string | undefined;
      let cid: string | undefined;
      let did: string | undefined;
      for (let i = 0; i < n; i++) {
        const name = c.names[i];
        if (name === 'sid') sid = segment(pathname, i);
        else if (name === 'cid') cid = segment(pathname, i);
        else if (name === 'did') did = segment(pathname, i);
      }
      return { route: c.route, template: c.template, params: { sid, cid, did } };
    }
    return undefined;
  };
}
