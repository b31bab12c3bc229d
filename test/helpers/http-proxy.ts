// A reverse proxy on 127.0.0.1 between a browser and the server, so a test can drop the page's
// event stream the way a network does, and hold its reconnection until the test has made events
// happen. Requests go through unchanged (the browser's Origin is the proxy's: the server must
// allow it with --allow-origin, as behind any real proxy).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SseRequest {
  readonly url: string;
  readonly lastEventId: string | undefined;
}

export interface HttpProxy {
  readonly origin: string;
  /** Every event-stream request seen, in order. */
  readonly streams: SseRequest[];
  setUpstream(port: number): void;
  /** Ends every open event stream cleanly (the browser then reconnects on its own). */
  dropStreams(): number;
  /** While held, new event-stream requests wait (and are forwarded on release). */
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

const isStream = (url: string | undefined) => /^\/v1\/sessions\/[^/]+\/events(\?|$)/.test(url ?? '');

export async function startHttpProxy(): Promise<HttpProxy> {
  let upstream = 0;
  let held = false;
  const waiting: Array<() => void> = [];
  const open = new Set<{ end(): void }>();
  const streams: SseRequest[] = [];
  const server = http.createServer((req, res) => {
    const forward = () => {
      const up = http.request({ host: '127.0.0.1', port: upstream, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        if (!isStream(req.url)) {
          upRes.pipe(res);
          return;
        }
        const handle = {
          end() {
            open.delete(handle);
            upRes.unpipe(res);
            up.destroy();
            // A clean end of the chunked body: the browser sees the stream end, not an error.
            res.end();
          },
        };
        open.add(handle);
        upRes.pipe(res);
        res.once('close', () => {
          open.delete(handle);
          up.destroy();
        });
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    };
    if (isStream(req.url)) {
      const id = req.headers['last-event-id'];
      streams.push({ url: req.url ?? '', lastEventId: typeof id === 'string' ? id : undefined });
      if (held) return void waiting.push(forward);
    }
    forward();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    streams,
    setUpstream(p) {
      upstream = p;
    },
    dropStreams() {
      const n = open.size;
      for (const s of [...open]) s.end();
      return n;
    },
    hold() {
      held = true;
    },
    release() {
      held = false;
      for (const f of waiting.splice(0)) f();
    },
    async close() {
      for (const s of [...open]) s.end();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
