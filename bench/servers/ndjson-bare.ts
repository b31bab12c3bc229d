// Baseline for case 3: the least a newline-delimited JSON-RPC server over stdio can do. It splits
// stdin on LF, parses each request (JSON.parse), and answers with a ready-made result: the text
// of subrun's own reply to the same request, given once in BENCH_RESULT, so the bytes on the wire
// are the same size. One write per reply, as subrun does. Run as its own process.
const result = process.env.BENCH_RESULT ?? 'null';
let rest = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  const text = rest + chunk;
  let start = 0;
  for (;;) {
    const nl = text.indexOf('\n', start);
    if (nl < 0) break;
    const line = text.slice(start, nl);
    start = nl + 1;
    if (line.length === 0) continue;
    const req = JSON.parse(line) as { id?: number | string | null };
    if (req.id === undefined) continue;
    process.stdout.write(`{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":${result}}\n`);
  }
  rest = text.slice(start);
});
process.stdin.on('end', () => process.exit(0));
