// Baseline for case 4: a bare `ws` server on 127.0.0.1 (compression off, like subrun's), which
// parses each text frame and answers with a ready-made result the size of subrun's reply (given
// once in BENCH_RESULT). Prints `listening PORT` on stdout. Run as its own process.
import { WebSocketServer } from 'ws';

const result = process.env.BENCH_RESULT ?? 'null';
const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
wss.on('connection', (ws) => {
  ws.on('message', (data) => {
    const req = JSON.parse(String(data)) as { id?: number | string | null };
    if (req.id === undefined) return;
    ws.send(`{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":${result}}`);
  });
});
wss.on('listening', () => {
  const addr = wss.address();
  process.stdout.write(`listening ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
});
process.on('SIGTERM', () => {
  for (const ws of wss.clients) ws.terminate();
  wss.close(() => process.exit(0));
});
