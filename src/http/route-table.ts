// The shape of a /v1/ route (routes.ts builds the table) and the matcher every request runs
// against it: kept apart so the table's file holds only the translations.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ListenerContext } from '../server/listener.ts';
import type { Answer } from './respond.ts';

/** What a handler reads of the request target: a URL, or a plain path's own (api.ts). */
export interface Target {
  readonly pathname: string;
  readonly searchParams: URLSearchParams;
}

export interface Call {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly ctx: ListenerContext;
  readonly url: Target;
  readonly params: Readonly<Record<string, string>>;
  readonly body: Record<string, unknown>;
}

/** An answer, or `streamed` when the handler wrote the response itself (the event stream). */
export type Handler = (call: Call) => Answer | 'streamed' | Promise<Answer | 'streamed'>;

export interface Route {
  readonly path: readonly string[];
  readonly methods: Readonly<Partial<Record<'GET' | 'POST' | 'DELETE', Handler>>>;
  /** An event stream: long-lived, so no request span. */
  readonly stream?: boolean;
}

/** The route and its path parameters, or undefined. An indexed loop: every request runs it (bench: http.steer). */
export function match(routes: readonly Route[], segments: readonly string[]): { route: Route; params: Record<string, string> } | undefined {
  outer: for (const route of routes) {
    const path = route.path;
    if (path.length !== segments.length) continue;
    const params: Record<string, string> = {};
    for (let i = 0; i < path.length; i++) {
      const p = path[i] ?? '';
      const s = segments[i] ?? '';
      if (p.charCodeAt(0) === 58 /* ':' */) {
        if (s === '') continue outer;
        params[p.slice(1)] = s;
      } else if (p !== s) continue outer;
    }
    return { route, params };
  }
  return undefined;
}
