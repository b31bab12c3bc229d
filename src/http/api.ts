// The HTTP side of the one listener: `GET /health`, `GET /` (to the dashboard), the `/v1/` API and
// the dashboard's files under `/ui/`. WebSocket upgrades never reach here (ws.ts takes them).
//
// Order of the checks on /v1/: the token (401, before anything about the path is revealed), the
// route (404 the same for every unknown path; 405 with Allow), the Origin (403), the body (415,
// 413, 400), then the method's own checks, whose errors are the JSON-RPC ones mapped to statuses.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../log.ts';
import { RpcCode, RpcError } from '../server/errors.ts';
import type { ServerHub } from '../server/hub.ts';
import { TokenCheck } from '../server/auth.ts';
import type { ListenerContext, RequestHandler } from '../server/listener.ts';
import { VERSION } from '../version.ts';
import { readBody } from './body.ts';
import { errorAnswer, HttpCode, httpError, notFound, send, type Answer } from './respond.ts';
import { buildRoutes } from './routes.ts';
import { compile, NO_QUERY, type Call, type Route, type Target } from './route-table.ts';
import { SseHub, type SseOptions } from './sse.ts';
import { DEFAULT_UI_DIR, UiFiles } from './ui.ts';
import { within } from '../telemetry/context.ts';
import { httpRequest, type RequestTrace } from '../telemetry/requests.ts';
import { metricsRoute } from './metrics.ts';
import { withProps } from '../shapes.ts';

export interface HttpApiOptions {
  readonly token: string;
  readonly logger: Logger;
  /** The dashboard's directory. Default: the package's own (src/http/ui/). */
  readonly ui_dir?: string;
  /** Unsent bytes one event stream may hold (the WebSocket's bound). Default 8 MiB. */
  readonly max_outbound_bytes?: number;
  readonly sse?: Omit<SseOptions, 'max_outbound_bytes'>;
  /**
   * A bearer token that reads `GET /metrics` and nothing else (the server token reads it too).
   * `/metrics` is served when the server keeps metrics (ServerOptions.metrics).
   */
  readonly metrics_token?: string;
  /** What other surfaces on the listener add to `features` (e.g. `mcp: true` for /mcp). */
  readonly features?: Readonly<Record<string, boolean>>;
}

export interface HttpApi {
  readonly handle: RequestHandler;
  readonly sse: SseHub;
}

const WRITES = new Set(['POST', 'DELETE', 'PUT', 'PATCH']);

/** Where a path of these characters alone parses to itself: no dot segment, escape, query or `//`. */
const PLAIN_TARGET = /^(?:\/[A-Za-z0-9_-]+)+\/?$/;

/**
 * The request target, undefined if it does not parse. A plain path (every API call a host makes
 * without a query) skips the WHATWG parser, which would give back the very same path and no
 * query (bench: http.steer).
 */
function targetOf(target: string | undefined): Target | undefined {
  if (target !== undefined && PLAIN_TARGET.test(target)) return { pathname: target, searchParams: NO_QUERY };
  try {
    return new URL(target ?? '/', 'http://localhost');
  } catch {
    return undefined;
  }
}

export function createHttpApi(server: ServerHub, opts: HttpApiOptions): HttpApi {
  const check = new TokenCheck(opts.token);
  const maxOut = opts.max_outbound_bytes ?? 8 * 1024 * 1024;
  const sse = new SseHub(server, opts.logger, withProps(opts.sse, { max_outbound_bytes: maxOut }));
  const ui = new UiFiles(opts.ui_dir ?? DEFAULT_UI_DIR, opts.token, check);
  const metrics = server.metrics ? metricsRoute(server.metrics, check, opts.metrics_token) : undefined;
  server.metrics?.addSources({ sseSubscribers: () => sse.size });
  let dashboard = false;
  void ui.present().then((yes) => (dashboard = yes));
  const routes: Route[] = buildRoutes({
    server,
    sse,
    max_outbound_bytes: maxOut,
    features: () => ({
      sse: true,
      resume: true,
      idempotency: true,
      session_idle: true,
      single_user: server.services.single_user,
      dashboard,
      ...opts.features,
    }),
  });

  const match = compile(routes);

  /** Writes an answer (nothing for a stream its handler wrote itself). Never throws: send() does not. */
  const reply = (res: ServerResponse, closing: boolean, a: Answer | 'streamed'): void => {
    if (a !== 'streamed') send(res, a, closing, server.limits.max_reply_bytes);
  };
  /**
   * Answers what threw: a wire error as itself, anything else logged and -32603. Never throws: it
   * runs in request events, where a throw would end the process.
   */
  const fail = (res: ServerResponse, closing: boolean, err: unknown): void => {
    try {
      if (err instanceof RpcError) return reply(res, closing, errorAnswer(err));
      opts.logger.error({ err }, 'HTTP request failed');
      reply(res, closing, httpError(RpcCode.InternalError, 'Internal error'));
    } catch (e) {
      opts.logger.error({ err: e }, 'HTTP answer not sent');
      res.destroy();
    }
  };

  /** A refusal made before the body is read: the body is drained, not read. */
  const refuse = (req: IncomingMessage, res: ServerResponse, closing: boolean, a: Answer): void => {
    req.resume();
    reply(res, closing, a);
  };

  /**
   * A /v1/ request, answered once (or streamed). No promise is made before the handler runs, and
   * a synchronous answer goes out in the step that ended the body, through functions made once
   * per server, not per request (bench: http.steer.p50@1conn); a handler's promise is answered
   * when it settles.
   */
  const api = (req: IncomingMessage, res: ServerResponse, ctx: ListenerContext, url: Target, closing: boolean): void => {
    const auth = check.of(req);
    if (auth === undefined) return refuse(req, res, closing, httpError(HttpCode.Unauthorized, 'unauthorized', { 'WWW-Authenticate': 'Bearer' }));
    const found = match(url.pathname);
    if (!found) return refuse(req, res, closing, notFound());
    const method = req.method ?? 'GET';
    const handler = method === 'GET' || method === 'POST' || method === 'DELETE' ? found.route.methods[method] : undefined;
    if (!handler) {
      return refuse(
        req,
        res,
        closing,
        withProps(httpError(RpcCode.MethodNotFound, 'method not allowed'), {
          status: 405,
          headers: { Allow: Object.keys(found.route.methods).join(', ') },
        }),
      );
    }
    // A browser sends its cookie with any page's request: a change it authenticates must come
    // from an allowed page. A foreign page's Origin is refused whatever the credentials.
    const origin = req.headers.origin;
    if (origin !== undefined && !ctx.isAllowedOrigin(origin)) return refuse(req, res, closing, httpError(HttpCode.Forbidden, 'origin not allowed'));
    if (auth === 'cookie' && WRITES.has(method) && origin === undefined) return refuse(req, res, closing, httpError(HttpCode.Forbidden, 'origin required'));
    // Runs in a request event: whatever throws is answered (fail), never thrown out of the event.
    const run = (body: Record<string, unknown>): void => {
      // The event stream outlives any trace: it gets no request span.
      let request: RequestTrace | undefined;
      try {
        request = found.route.stream === true ? undefined : httpRequest(method, found.template, found.params.sid, req.headers);
        const call: Call = { req, res, ctx, url, params: found.params, body };
        const handled = request ? within(request.ctx, () => handler(call)) : handler(call);
        if (!(handled instanceof Promise)) {
          request?.end(undefined, handled === 'streamed' ? 200 : handled.status);
          return reply(res, closing, handled);
        }
        const trace = request;
        handled
          .then(
            (a) => {
              trace?.end(undefined, a === 'streamed' ? 200 : a.status);
              reply(res, closing, a);
            },
            (err: unknown) => {
              trace?.end(err instanceof RpcError ? err.code : RpcCode.InternalError);
              fail(res, closing, err);
            },
          )
          // Nothing here may reject unhandled: that would end the process.
          .catch((err: unknown) => fail(res, closing, err));
      } catch (err) {
        request?.end(err instanceof RpcError ? err.code : RpcCode.InternalError);
        fail(res, closing, err);
      }
    };
    if (method === 'GET') {
      req.resume();
      return run({});
    }
    readBody(req, server.limits.max_message_bytes, (read) => (read.ok ? run(read.value) : reply(res, closing, read.answer)));
  };

  const handle: RequestHandler = (req, res, ctx) => {
    const closing = !ctx.accepting;
    const url = targetOf(req.url);
    if (url === undefined) {
      req.resume();
      return reply(res, closing, httpError(RpcCode.InvalidRequest, 'bad request target'));
    }
    try {
      const path = url.pathname;
      if (path === '/v1' || path.startsWith('/v1/')) return api(req, res, ctx, url, closing);
      if (path === '/metrics' && metrics) return metrics(req, res, closing);
      req.resume();
      if (path === '/health') return reply(res, closing, { status: 200, body: { status: 'ok', version: VERSION } });
      if (path === '/') return reply(res, closing, { status: 302, body: {}, headers: { Location: '/ui/' } });
      if (path === '/ui' || path.startsWith('/ui/')) {
        ui.serve(req, res, url, closing).catch((err: unknown) => fail(res, closing, err));
        return;
      }
      reply(res, closing, notFound());
    } catch (err) {
      fail(res, closing, err);
    }
  };

  return { handle, sse };
}
