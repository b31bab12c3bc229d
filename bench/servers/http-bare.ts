// Baseline for the HTTP case: a bare node:http server on 127.0.0.1. `GET /events` holds an SSE
// response (the same headers and `retry:` line as subrun's; node:http's default chunked framing,
// or with `?raw=1` close-delimited, as subrun's is); `POST /fire` writes the frames of
// BENCH_FRAMES_FILE (subrun's own bytes, captured once) to every open stream, one frame per write
// and one tick's frames per socket write, as subrun does; `POST /steer` reads the body and answers
// 202 with BENCH_RESULT. Prints `listening PORT` on stdout. Run as its own process.
import { readFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';

const result = process.env.BENCH_RESULT ?? '{}';
const frames = process.env.BENCH_FRAMES_FILE ? readFileSync(process.env.BENCH_FRAMES_FILE, 'utf8').split(/(?<=\n\n)/) : [];
const streams = new Set<ServerResponse>();

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url?.startsWith('/events')) {
    // `?raw=1`: the body close-delimited, as subrun's own stream is (no chunk framing).
    if (req.url.includes('raw=1')) res.useChunkedEncodingByDefault = false;
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Accel-Buffering': 'no',
      'X-Content-Type-Options': 'nosniff',
    });
    res.socket?.setNoDelay(true);
    res.write('retry: 2000\n\n');
    streams.add(res);
    res.once('close', () => streams.delete(res));
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/fire') {
      res.writeHead(204).end();
      let i = 0;
      const burst = () => {
        for (const s of streams) s.cork();
        for (const end = Math.min(frames.length, i + 64); i < end; i++) for (const s of streams) s.write(frames[i]);
        for (const s of streams) s.uncork();
        if (i < frames.length) setImmediate(burst);
      };
      burst();
      return;
    }
    JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    res.writeHead(202, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(result),
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    });
    res.end(result);
  });
});
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`listening ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
});
process.on('SIGTERM', () => {
  for (const s of streams) s.destroy();
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
