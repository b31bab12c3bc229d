// A floor for the HTTP steer rows: bare node:http, answering as http-bare.ts answers `POST /steer`,
// that runs for each `POST /steer/<i>` the runtime's steer to holder i as bench/lib/floor.ts measures
// it in-process and the route runs it (a transient transport attached with the session's key, proved
// once per connection, `subagent.steer`, the detach), on a server with its metrics on as `serve --ws`
// keeps them. It has none of subrun's HTTP layer (the token, the route table, the key header, the
// answer's bound): what a server that answers steers over node:http with this runtime spends at
// least, under the same load. A steer not queued is answered 409, so the load generator counts it
// as a bad answer. `POST /reset` closes the session and opens a fresh one with fresh holders, as the
// case gives subrun a fresh session each round. Prints `listening PORT` once its holders run. Run
// compiled (.bench-build/), as its own process.
import { createServer } from 'node:http';
import { floorServer, holders, session, valueOf } from '../lib/floor.ts';

const HOLDERS = 16;

const server = floorServer(true);

/** A session with HOLDERS children that hold every steer, running. */
async function fresh(): Promise<{ session_id: string; session_key: string; ids: string[] }> {
  const s = await session(server);
  const spawner = server.transientId();
  server.sessions.rebind(s.session_id, s.session_key, spawner);
  const ids = await holders(server, s.session_id, spawner, HOLDERS);
  await new Promise((r) => setTimeout(r, 50));
  return { ...s, ids };
}

let current = await fresh();

async function reset(): Promise<void> {
  const old = current;
  const tr = server.transientId();
  server.sessions.rebind(old.session_id, old.session_key, tr);
  await valueOf(server.invoke('session.close', { session_id: old.session_id }, tr).value);
  current = await fresh();
}

const http = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/reset') {
      reset().then(
        () => res.writeHead(204).end(),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
      return;
    }
    steer(req.url ?? '', Buffer.concat(chunks), req.socket).then(
      ({ status, text }) => {
        res.writeHead(status, {
          'Content-Type': 'application/json; charset=utf-8',
          'Content-Length': Buffer.byteLength(text),
          'Cache-Control': 'no-store',
          'X-Content-Type-Options': 'nosniff',
        });
        res.end(text);
      },
      // Never a crash: the load generator counts the 500 as a bad answer and the case fails.
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
});

/** One steer to holder i of `/steer/<i>`, as the route runs it; 202 when queued, 409 otherwise. */
async function steer(url: string, raw: Buffer, socket: object): Promise<{ status: number; text: string }> {
  const body = JSON.parse(raw.toString('utf8') || '{}') as { text?: unknown };
  const s = current;
  const subagent_id = s.ids[Number(url.slice('/steer/'.length)) % HOLDERS] ?? '';
  const tr = server.transientId();
  server.sessions.rebind(s.session_id, s.session_key, tr, socket);
  let answer: unknown;
  try {
    answer = server.invoke('subagent.steer', { session_id: s.session_id, subagent_id, text: body.text }, tr).value;
  } finally {
    server.sessions.detach(s.session_id, tr);
  }
  const v = await valueOf(answer);
  const queued = typeof v === 'object' && v !== null && 'status' in v && v.status === 'queued';
  return { status: queued ? 202 : 409, text: JSON.stringify(v) };
}

http.listen(0, '127.0.0.1', () => {
  const addr = http.address();
  process.stdout.write(`listening ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
});
process.on('SIGTERM', () => {
  http.close(() => void server.shutdown().then(() => process.exit(0)));
  http.closeAllConnections();
});
