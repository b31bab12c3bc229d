// `GET /metrics`: the server's Prometheus registry in the text format. Authenticated by a bearer
// alone (the metrics token, or the server token): no cookie, no `?token=`, so a page a browser
// visits can never read it, and the metrics token opens nothing else (a scraper's credential
// leaking reveals counts, never a session).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerOf, TokenCheck } from '../server/auth.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { RpcCode } from '../server/errors.ts';
import { HttpCode, httpError, send } from './respond.ts';
import { withProps } from '../shapes.ts';

export function metricsRoute(
  metrics: Metrics,
  server: TokenCheck,
  metricsToken: string | undefined,
): (req: IncomingMessage, res: ServerResponse, closing: boolean) => void {
  const scraper = metricsToken === undefined ? undefined : new TokenCheck(metricsToken);
  return (req, res, closing) => {
    req.resume();
    const bearer = bearerOf(req);
    if (bearer === undefined || !(server.token(bearer) || scraper?.token(bearer) === true)) {
      send(res, httpError(HttpCode.Unauthorized, 'unauthorized', { 'WWW-Authenticate': 'Bearer' }), closing);
      return;
    }
    if (req.method !== 'GET') {
      send(res, withProps(httpError(RpcCode.MethodNotFound, 'method not allowed'), { status: 405, headers: { Allow: 'GET' } }), closing);
      return;
    }
    metrics.scrape().then(
      (text) => {
        if (res.headersSent || res.destroyed) return;
        res.writeHead(200, {
          'Content-Type': 'text/plain; version=0.0.4; charset=utf-8',
          'Content-Length': Buffer.byteLength(text, 'utf8'),
          'Cache-Control': 'no-store',
          ...(closing ? { Connection: 'close' } : {}),
        });
        res.end(text);
      },
      () => send(res, httpError(RpcCode.InternalError, 'metrics unavailable'), closing),
    );
  };
}
