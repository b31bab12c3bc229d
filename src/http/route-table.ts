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
 * The matcher of a table: the parameters land in one fixed-shape object, so a request neither
 * makes a dictionary nor interns a key, and the path is split once with no copy of the segments
 * (bench: http.steer.p50@1conn). A parameter matches any non-empty segment, a literal itself.
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
  return (pathname) => {
    if (pathname.charCodeAt(0) !== 47 /* '/' */) return undefined;
    // segments[0] is the '' before the leading slash: route segment i is segments[i + 1].
    const segments = pathname.split('/');
    const n = segments.length - 1;
    outer: for (const c of table) {
      if (c.literals.length !== n) continue;
      for (let i = 0; i < n; i++) {
        const literal = c.literals[i];
        const s = segments[i + 1] ?? '';
        if (literal === undefined ? s === '' : literal !== s) continue outer;
      }
      let sid: string | undefined;
      let cid: string | undefined;
      let did: string | undefined;
      for (let i = 0; i < n; i++) {
        const name = c.names[i];
        if (name === 'sid') sid = segments[i + 1];
        else if (name === 'cid') cid = segments[i + 1];
        else if (name === 'did') did = segments[i + 1];
      }
      return { route: c.route, template: c.template, params: { sid, cid, did } };
    }
    return undefined;
  };
}
