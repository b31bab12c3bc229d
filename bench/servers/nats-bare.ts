// Floor for case 11's control-plane CPU: what the NATS client alone spends on a remote child's
// traffic, as a control plane receives it. It asks one request per child (the assignment) and
// decodes every event the bench then publishes for that child (the worker's `sr.ev.<child>`
// messages, captured from the real run), and nothing else: no record, no relay, no host. Prints
// `ready` once subscribed; on `bare.go` ({children, events, assign}) it runs one round and answers
// when every event arrived. Run as its own process, its CPU read from /proc.
import { connect } from '@nats-io/transport-node';

const nc = await connect({ servers: process.env.NATS_URL ?? '', noAsyncTraces: true });
const decoder = new TextDecoder();
let expected = 0;
let seen = 0;
let finished: (() => void) | undefined;
nc.subscribe('bare.ev.*', {
  callback: (_err, m) => {
    JSON.parse(decoder.decode(m.data));
    if (++seen === expected) finished?.();
  },
});
nc.subscribe('bare.go', {
  callback: (_err, m) => {
    const go = JSON.parse(decoder.decode(m.data)) as { children: number; events: number; assign: string };
    expected = go.children * go.events;
    seen = 0;
    const all = new Promise<void>((resolve) => (finished = resolve));
    void (async () => {
      // The assignments, 50 at a time as the case's batches place them.
      for (let i = 0; i < go.children; i += 50) {
        const batch = Array.from({ length: Math.min(50, go.children - i) }, () => nc.request('bare.assign', go.assign, { timeout: 5000 }));
        for (const r of await Promise.all(batch)) JSON.parse(decoder.decode(r.data));
      }
      m.respond('assigned');
      await all;
      nc.publish('bare.done', 'done');
    })();
  },
});
await nc.flush();
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void nc.close().then(() => process.exit(0));
});
