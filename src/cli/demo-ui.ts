// `subrun demo --ui` (`npm start -- --ui`): the demo's story on a real server, to watch in the
// dashboard. One listener on 127.0.0.1 (any free port) serves the API, the event streams and
// /ui/; the demo is a host like any other: it creates a session, spawns the story's children and
// steers and interrupts them over HTTP, so the page shows the steers' fate as a host sees it.
// It prints the dashboard's link (token and session in it; the page drops both from the address
// bar), waits for the page to connect (or 30 s), plays the story, then keeps serving until Ctrl-C.
import { randomBytes } from 'node:crypto';
import { createHttpApi } from '../http/api.ts';
import { createLogger } from '../log.ts';
import { RpcServer } from '../server.ts';
import { listenWs } from '../rpc/transports/ws.ts';
import { isCompletionEntry, STORY_STEERS, storyTasks } from './demo-story.ts';

export interface UiDemoOptions {
  readonly fast?: boolean;
  readonly out?: NodeJS.WritableStream;
  /** Waits this long for a dashboard to connect before the story starts. Default 30 s (0 with fast). */
  readonly wait_for_page_ms?: number;
}

export async function runUiDemo(options: UiDemoOptions = {}): Promise<number> {
  const out = options.out ?? process.stdout;
  const say = (line: string) => out.write(`  ${line}\n`);
  const ms = (n: number) => (options.fast ? Math.round(n / 4) : n * 2);
  const logger = createLogger('warn');
  const server = new RpcServer({ max_concurrent_children: 3, max_spawn_depth: 2, logger });
  const token = randomBytes(18).toString('base64url');
  const http = createHttpApi(server, { token, logger });
  const listener = await listenWs(
    {
      host: '127.0.0.1',
      port: 0,
      token,
      allow_origins: [],
      max_message_bytes: server.limits.max_message_bytes,
      shutdown_grace_ms: 1000,
      logger,
      onRequest: http.handle,
    },
    (t) => server.connect(t),
  );
  const base = listener.url.replace(/^ws:/, 'http:').replace(/\/$/, '');
  const api = async (method: string, path: string, key?: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(key ? { 'X-Subrun-Session-Key': key } : {}),
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const answer: unknown = await res.json();
    return { status: res.status, body: isRecord(answer) ? answer : {} };
  };

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      listener.stopAccepting();
      await server.shutdown();
      await listener.close();
    })());

  const created = await api('POST', '/v1/sessions', undefined, { title: 'demo' });
  const sid = String(created.body.session_id);
  const key = String(created.body.session_key);
  out.write(`subrun dashboard: ${base}/ui/?token=${encodeURIComponent(token)}#session=${encodeURIComponent(sid)}&key=${encodeURIComponent(key)}\n`);

  const wait = options.wait_for_page_ms ?? (options.fast ? 0 : 30_000);
  if (wait > 0 && http.sse.size === 0) {
    say(`open the link above; the story starts when the page connects (or in ${Math.round(wait / 1000)} s)`);
    await until(() => http.sse.size > 0, wait);
  }

  const child = (id: string) => `/v1/sessions/${sid}/subagents/${id}`;
  const steer = async (id: string, text: string) => {
    const r = await api('POST', `${child(id)}/steer`, key, { text });
    say(`steer ${id}: ${r.status === 202 ? `queued as ${String(r.body.steer_id)}` : `refused (${r.status})`}`);
  };
  // Subscribed before the spawn: the children start while its answer is on its way. Each is
  // known by its goal (the story's own, see storyTasks), so no event can come before its id.
  const timers: NodeJS.Timeout[] = [];
  const later = (delay: number, fn: () => Promise<void>) => timers.push(setTimeout(() => void fn(), ms(delay)));
  const unsubscribe = server.runtime.events.subscribe('subagent.**', (e) => {
    const id = String(e.subagent_id);
    const goal = String(e.goal);
    if (e.type === 'subagent.text' && goal.startsWith('research:') && e.text === STORY_STEERS.research.when)
      later(300, () => steer(id, STORY_STEERS.research.text));
    if (e.type === 'subagent.text' && goal.startsWith('summarize:') && e.text === STORY_STEERS.summarize.when) void steer(id, STORY_STEERS.summarize.text);
    if (e.type === 'subagent.tool' && goal === 'crawl page 2' && typeof e.parent_id === 'string') {
      const crawl = e.parent_id;
      later(600, async () => {
        const r = await api('POST', `${child(crawl)}/interrupt`, key, {});
        const stopped = r.body.interrupted;
        say(`interrupt ${crawl}: stopped [${Array.isArray(stopped) ? stopped.join(', ') : ''}]`);
      });
    }
    if (e.type === 'subagent.complete' && isCompletionEntry(e.entry)) {
      const entry = e.entry;
      say(`${id} finished: ${entry.status}${entry.missed_steer ? ` (missed_steer: ${JSON.stringify(entry.missed_steer)})` : ''}`);
    }
  });
  const spawned = await api('POST', `/v1/sessions/${sid}/delegations`, key, { tasks: storyTasks(ms) });
  say(`delegated ${String(spawned.body.count)} children (${String(spawned.body.delegation_id)})`);

  let done = false;
  while (!done) {
    const r = await api('GET', `/v1/sessions/${sid}/delegations/${String(spawned.body.delegation_id)}?wait=60`, key);
    done = r.body.done === true;
  }
  for (const t of timers) clearTimeout(t);
  unsubscribe();
  say('the story is over; the dashboard stays up until Ctrl-C');

  await new Promise<void>((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve());
  });
  await stop();
  return 0;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Resolves when `pred()` holds (checked every 100 ms) or after `ms`. */
function until(pred: () => boolean, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const deadline = setTimeout(finish, ms);
    const tick = setInterval(() => {
      if (pred()) finish();
    }, 100);
    function finish() {
      clearTimeout(deadline);
      clearInterval(tick);
      resolve();
    }
  });
}
