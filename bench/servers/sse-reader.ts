// A reader of one SSE stream, run as its own process so that the bench's client side is never the
// bound (issue 24: one client process drained 50 streams and its ratio measured the client). It
// speaks raw TCP: one GET, then it only counts. Each frame starts a line with `id: `; a round ends
// with the `session.idle` frame. Prints `ready CPU_US` once the response head is in, then one line per
// round: `idle FRAMES CPU_US` (frames since the last line, this process's CPU time so far).
//
//   SSE_PORT, SSE_PATH, SSE_TOKEN: where to read (127.0.0.1 only).
import { connect } from 'node:net';

const port = Number(process.env.SSE_PORT);
const path = process.env.SSE_PATH ?? '/events';
const token = process.env.SSE_TOKEN ?? '';

const FRAME = Buffer.from('\nid: ');
const IDLE = Buffer.from('event: session.idle\n');
const KEEP = Math.max(FRAME.length, IDLE.length) - 1;

let head = true;
let frames = 0;
let carry: Buffer = Buffer.alloc(0);

/** Occurrences of `needle` in `buf` that end at or after `from` (so none is counted twice across chunks). */
function count(buf: Buffer, needle: Buffer, from: number): number {
  let n = 0;
  for (let i = buf.indexOf(needle, Math.max(0, from - needle.length + 1)); i >= 0; i = buf.indexOf(needle, i + 1)) n++;
  return n;
}

const socket = connect({ host: '127.0.0.1', port }, () => {
  socket.setNoDelay(true);
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`);
});
socket.on('data', (chunk: Buffer) => {
  const buf = carry.length === 0 ? chunk : Buffer.concat([carry, chunk]);
  const from = carry.length;
  if (head) {
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) {
      carry = buf;
      return;
    }
    head = false;
    if (!/^HTTP\/1\.1 200/.test(buf.subarray(0, 12).toString('latin1'))) {
      process.stderr.write(`sse-reader: ${buf.subarray(0, end).toString('latin1')}\n`);
      process.exit(1);
    }
    const cpu = process.cpuUsage();
    process.stdout.write(`ready ${cpu.user + cpu.system}\n`);
  }
  frames += count(buf, FRAME, from);
  const idles = count(buf, IDLE, from);
  for (let i = 0; i < idles; i++) {
    const cpu = process.cpuUsage();
    process.stdout.write(`idle ${frames} ${cpu.user + cpu.system}\n`);
    frames = 0;
  }
  carry = buf.subarray(Math.max(0, buf.length - KEEP));
});
socket.on('error', (err) => {
  process.stderr.write(`sse-reader: ${err.message}\n`);
  process.exit(1);
});
socket.on('close', () => process.exit(0));
process.on('SIGTERM', () => socket.destroy());
