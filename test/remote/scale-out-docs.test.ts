// docs/scale-out.md runs as shown: its "How to run it" commands (one nats-server, one control
// plane, two workers), with free ports and a temp store in place of the fixed ones, then a child
// spawned over the wire completes on a worker.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { findNatsServer, freePort } from '../helpers/nats.ts';
import { call, connectWs, killAll, nextEvent, ROOT, scriptedTask, spawnSubrun, WAIT_MS } from '../helpers/process.ts';
import { wireEntry } from '../helpers/wire-entry.ts';

afterEach(async () => {
  await killAll();
});

function shownCommands(): string[] {
  const doc = readFileSync(join(ROOT, 'docs/scale-out.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## How to run it'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return block.split('\n').filter((l) => l.trim() !== '');
}

it('the commands in docs/scale-out.md start a control plane and workers that run a child', async () => {
  const commands = shownCommands();
  expect(commands.map((c) => c.split(' ')[0] + ' ' + c.split(' ')[1])).toEqual(['nats-server -js', 'subrun serve', 'subrun worker', 'subrun worker']);
  const natsPort = await freePort();
  const store = mkdtempSync(join(tmpdir(), 'subrun-doc-nats-'));
  const subst = (c: string) => c.replaceAll('4222', String(natsPort)).replaceAll('--port 8787', '--port 0').replaceAll('./nats-store', store);
  const [natsLine, serveLine, ...workerLines] = commands.map(subst) as [string, string, ...string[]];
  const nats = spawn(findNatsServer(), natsLine.split(' ').slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    await new Promise<void>((resolve, reject) => {
      let log = '';
      const timer = setTimeout(() => reject(new Error(`nats-server not ready: ${log}`)), WAIT_MS);
      nats.stderr.setEncoding('utf8');
      nats.stderr.on('data', (d: string) => {
        log += d;
        if (log.includes('Server is ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const serve = spawnSubrun(serveLine.split(' ').slice(1));
    const listening = await serve.stderr.take((l) => l.startsWith('subrun listening on '), WAIT_MS, 'the listening line');
    const url = listening.slice('subrun listening on '.length).trim();
    for (const w of workerLines) {
      const p = spawnSubrun(w.split(' ').slice(1));
      await p.stderr.take((l) => l.startsWith('subrun worker '), WAIT_MS, 'the worker line');
    }
    const { peer } = await connectWs({ proc: serve, url, port: Number(new URL(url).port), token: 'secret' });
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create');
    const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', {
      session_id,
      tasks: [scriptedTask('from the docs', [{ op: 'finish', summary: 'ran on a worker' }])],
    });
    const done = await nextEvent(peer, (e) => e.type === 'subagent.complete' && e.payload.subagent_id === subagent_ids[0]);
    expect(wireEntry(done.payload)).toMatchObject({ status: 'completed', summary: 'ran on a worker' });
  } finally {
    nats.kill('SIGKILL');
    rmSync(store, { recursive: true, force: true });
  }
});
