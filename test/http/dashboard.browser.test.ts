// The dashboard in a real browser: Debian's Chromium driven by playwright-core, against a real
// `subrun serve --ws` process, through a proxy that can drop the page's event stream. One story:
// open with the token, create a session, spawn scripted children through the API, watch them
// appear (grandchildren under their parents), steer one and see it delivered, steer one that
// cannot take it and see it missed (once, with its fate), a finished one offers no steer, interrupt
// a subtree after confirming, the Timeline drawing all of it live (bars, steer markers by fate,
// interrupt marks), drop the stream and see it resume with nothing lost, the idle badge, and not
// one console error. The screenshot in docs/ is taken here.
import { existsSync } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { killAll, scriptedTask, startWsServer, type WsServer } from '../helpers/process.ts';
import { startHttpProxy, type HttpProxy } from '../helpers/http-proxy.ts';

const CHROMIUM = [process.env.CHROMIUM, '/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p): p is string => typeof p === 'string' && existsSync(p));
/**
 * The README's screenshot is rewritten only when asked (SUBRUN_UPDATE_SCREENSHOT=1): its ids change
 * on every run, and a test run should not leave the tree modified. Otherwise it goes to a temp dir.
 */
const SCREENSHOT =
  process.env.SUBRUN_UPDATE_SCREENSHOT === '1'
    ? fileURLToPath(new URL('../../docs/dashboard.png', import.meta.url))
    : join(tmpdir(), `subrun-dashboard-${process.pid}.png`);
/** Bound of one wait for the page to show something. */
const UI_MS = 15_000;

let server: WsServer;
let proxy: HttpProxy;
let browser: Browser;
let page: Page;
const consoleErrors: string[] = [];

beforeAll(async () => {
  if (!CHROMIUM) throw new Error('no Chromium: apt-get install chromium (or set CHROMIUM to a Chromium or Chrome binary)');
  proxy = await startHttpProxy();
  server = await startWsServer(['--allow-origin', proxy.origin, '--max-spawn-depth', '2']);
  proxy.setUpstream(server.port);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // playwright makes (and removes) a fresh --user-data-dir for each launch.
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  page = await (await browser.newContext({ viewport: { width: 1400, height: 860 } })).newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(`${m.text()} @ ${m.location().url}`);
  });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await killAll();
});

/** The API, as a host would call it (bearer token, straight to the server). */
async function api(method: string, path: string, key: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${server.port}${path}`, {
    method,
    headers: { Authorization: `Bearer ${server.token}`, 'X-Subrun-Session-Key': key, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const row = (id: string) => page.locator(`tr[data-subagent-id="${id}"]`);
const status = (id: string, s: string) => page.waitForSelector(`tr[data-subagent-id="${id}"][data-status="${s}"]`, { timeout: UI_MS });

async function steerFromPage(id: string, text: string): Promise<void> {
  await row(id).click();
  await page.waitForSelector('#detail:not([hidden])', { timeout: UI_MS });
  await page.locator('#detail-title').filter({ hasText: id }).waitFor({ timeout: UI_MS });
  await page.fill('#steer-text', text);
  await page.click('#steer-send');
}

const fate = (text: string, f: string) => page.waitForSelector(`#steers li[data-text="${text}"][data-fate="${f}"]`, { timeout: UI_MS });

describe('the dashboard in Chromium', () => {
  it('watches, steers and stops children, resumes a dropped stream with nothing lost, and logs no error', async () => {
    // Open with the token: the page trades it for a cookie and drops it from the address bar.
    await page.goto(`${proxy.origin}/ui/?token=${encodeURIComponent(server.token)}`);
    expect(new URL(page.url()).search).toBe('');
    await page.fill('#title', 'review');
    await page.click('#create-session');
    const li = page.locator('#sessions li[data-session-id]');
    await li.first().waitFor({ timeout: UI_MS });
    const sid = (await li.first().getAttribute('data-session-id')) as string;
    const stored = await page.evaluate<string | null>("localStorage.getItem('subrun.sessions')");
    const key = (JSON.parse(stored ?? '[]') as Array<{ session_id: string; session_key: string }>).find((s) => s.session_id === sid)?.session_key as string;
    expect(key).toBeTruthy();
    await page.waitForSelector('#conn[data-state="live"]', { timeout: UI_MS });

    // B spawns B1 and waits for it inside its spawn step (no delivery point): a steer to B can
    // only miss. B1 waits for a steer: one sent to it is delivered. C spawns C1, which hangs.
    const spawned = await api('POST', `/v1/sessions/${sid}/delegations`, key, {
      tasks: [
        scriptedTask('summarize: draft with a helper', [
          { op: 'tool', name: 'summarize', ms: 50 },
          {
            op: 'spawn',
            tasks: [
              scriptedTask('notes: wait for guidance', [
                { op: 'say', text: 'waiting for guidance' },
                { op: 'wait_steer' },
                { op: 'tool', name: 'write_notes', ms: 50 },
                { op: 'finish', summary: 'notes on section 5' },
              ]),
            ],
          },
          { op: 'finish', summary: 'a 200-word summary' },
        ]),
        scriptedTask('crawl: index the site', [
          { op: 'tool', name: 'fetch_index', ms: 50 },
          { op: 'spawn', tasks: [scriptedTask('crawl page 2', [{ op: 'tool', name: 'fetch_page', ms: 50 }, { op: 'hang' }])] },
        ]),
      ],
    });
    expect(spawned.status).toBe(202);
    const [b, c] = spawned.body.subagent_ids as [string, string];
    await status(b, 'running');
    await status(c, 'running');
    // The Timeline draws them live: a bar per child, running for now.
    const tl = page.getByRole('region', { name: 'Timeline' });
    expect(await tl.getAttribute('data-timeline')).toBe('');
    await tl.locator(`[data-subagent-id="${b}"][data-status="running"]`).waitFor({ timeout: UI_MS });
    // The grandchildren appear under their parents, one level deeper.
    const grand = page.locator('tr[data-subagent-id]');
    await expect.poll(() => grand.count(), { timeout: UI_MS }).toBe(4);
    const listed = (await api('GET', `/v1/sessions/${sid}/subagents`, key)).body.subagents as Array<{ subagent_id: string; parent_id: string | null }>;
    const b1 = listed.find((s) => s.parent_id === b)?.subagent_id as string;
    const c1 = listed.find((s) => s.parent_id === c)?.subagent_id as string;
    const order = await grand.evaluateAll((rows) => rows.map((r) => r.getAttribute('data-subagent-id')));
    expect(order.indexOf(b1)).toBe(order.indexOf(b) + 1);
    expect(order.indexOf(c1)).toBe(order.indexOf(c) + 1);

    // A steer B cannot take before it finishes: queued now, missed at its completion.
    await steerFromPage(b, 'keep it short');
    await fate('keep it short', 'queued');
    await expect.poll(() => row(b).locator('td').nth(6).textContent(), { timeout: UI_MS }).toBe('1');

    // B1's live tail, then a steer it takes.
    await row(b1).click();
    await page.locator('#tail').filter({ hasText: 'waiting for guidance' }).waitFor({ timeout: UI_MS });
    await steerFromPage(b1, 'focus on section 5');
    await fate('focus on section 5', 'delivered');
    await status(b1, 'completed');
    await status(b, 'completed');
    await page.locator('#tail').filter({ hasText: 'focus on section 5' }).waitFor({ timeout: UI_MS });
    const tailText = (await page.locator('#tail').textContent()) ?? '';
    // Followed by offset: every line once.
    expect(tailText.split('waiting for guidance').length).toBe(2);
    await expect.poll(() => row(b).locator('div.missed').textContent(), { timeout: UI_MS }).toBe('missed steer: keep it short');
    // The missed steer shows once in the outcome (its note is not repeated in the summary).
    expect(await row(b).locator('.summary').textContent()).toBe('a 200-word summary');
    expect(((await row(b).locator('.outcome').textContent()) ?? '').split('keep it short').length).toBe(2);
    // The Timeline followed: the same bars, now completed; B1's delivered steer, B's missed one at its end.
    await tl.locator(`[data-subagent-id="${b}"][data-status="completed"]`).waitFor({ timeout: UI_MS });
    await tl.locator(`[data-fate="delivered"][data-subagent-id="${b1}"][data-steer-id]`).waitFor({ timeout: UI_MS });
    await tl.locator(`[data-fate="missed"][data-subagent-id="${b}"][data-steer-id]`).waitFor({ timeout: UI_MS });
    // A finished child takes no steer: the page does not offer it (the server would answer 409).
    await row(b1).click();
    await page
      .locator('#detail-title')
      .filter({ hasText: `${b1} · completed` })
      .waitFor({ timeout: UI_MS });
    expect(await page.locator('#steer-send').isDisabled()).toBe(true);
    await row(b).click();
    await fate('keep it short', 'missed');
    expect(await page.locator('#steers li[data-text="keep it short"]').count()).toBe(1);

    // Drop the event stream; while the page is cut off, more happens.
    const before = proxy.streams.length;
    proxy.hold();
    expect(proxy.dropStreams()).toBe(1);
    await page.waitForSelector('#conn[data-state="reconnecting"]', { timeout: UI_MS });
    const seqAtDrop = Number(/seq (\d+)/.exec((await page.locator('#conn').textContent()) ?? '')?.[1]);
    const away = await api('POST', `/v1/sessions/${sid}/delegations`, key, {
      tasks: [
        scriptedTask('check: run while the page is away', [
          { op: 'tool', name: 'quick_check' },
          { op: 'finish', summary: 'done while you were away' },
        ]),
      ],
    });
    const [d] = away.body.subagent_ids as [string];
    const waited = await api('GET', `/v1/sessions/${sid}/delegations/${String(away.body.delegation_id)}?wait=10`, key);
    expect(waited.body.done).toBe(true);
    proxy.release();
    await page.waitForSelector('#conn[data-state="live"]', { timeout: UI_MS });
    // The browser resumed on its own, from the last seq it had.
    const resumed = proxy.streams.slice(before);
    expect(resumed.length).toBeGreaterThan(0);
    expect(resumed[0]?.lastEventId).toBe(String(seqAtDrop));
    await status(d, 'completed');
    await expect.poll(() => row(d).locator('.summary').textContent(), { timeout: UI_MS }).toBe('done while you were away');

    // Interrupt C's subtree, after confirming.
    await row(c).click();
    await page.click('#stop-ask');
    await page.locator('#stop').filter({ hasText: '1 descendant' }).waitFor({ timeout: UI_MS });
    await page.click('#stop-confirm');
    await status(c1, 'interrupted');
    await status(c, 'interrupted');
    // One interrupt, a mark on the target and on its descendant; bars in tree order, indented.
    await tl.locator(`[data-interrupt][data-subagent-id="${c1}"]`).waitFor({ timeout: UI_MS });
    expect(await tl.locator(`[data-interrupt][data-subagent-id="${c}"]`).count()).toBe(1);
    await tl.locator(`[data-subagent-id="${c}"][data-status="interrupted"]`).waitFor({ timeout: UI_MS });
    const bars = await tl.locator('.tl-bar[data-subagent-id]').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-subagent-id')));
    expect(bars.slice(0, 4)).toEqual([b, b1, c, c1]);
    expect(await tl.locator('[data-legend]').evaluateAll((ls) => ls.map((l) => l.getAttribute('data-legend')))).toEqual(
      expect.arrayContaining(['queued', 'delivered', 'missed', 'rejected']),
    );
    await page.waitForSelector('#idle[data-idle="true"]', { timeout: UI_MS });

    // Nothing lost, nothing twice: the page's seq is the session's, and its event log holds
    // every seq from its first line to the last exactly once.
    const session = await api('GET', `/v1/sessions/${sid}`, key);
    await expect
      .poll(async () => Number(/seq (\d+)/.exec((await page.locator('#conn').textContent()) ?? '')?.[1]), { timeout: UI_MS })
      .toBe(session.body.latest_seq);
    const seqs = await page.locator('#log li').evaluateAll((lis) => lis.map((l) => Number(l.getAttribute('data-seq'))));
    expect(seqs.length).toBeGreaterThan(10);
    expect(seqs).toEqual(seqs.map((_, i) => (seqs[0] as number) + i));
    expect(seqs.at(-1)).toBe(session.body.latest_seq);
    expect(await page.locator('#conn').textContent()).toContain('resumed 1×');
    expect(await page.locator('#conn').textContent()).not.toContain('gap');
    // The roster agrees with the server's.
    const final = (await api('GET', `/v1/sessions/${sid}/subagents?include_finished=true`, key)).body.subagents as Array<{
      subagent_id: string;
      status: string;
    }>;
    for (const s of final) expect(await row(s.subagent_id).getAttribute('data-status')).toBe(s.status);
    expect(await page.locator('tr[data-subagent-id]').count()).toBe(final.length);

    await row(b).click();
    await mkdir(dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect((await stat(SCREENSHOT)).size).toBeGreaterThan(10_000);
    if (process.env.SUBRUN_UPDATE_SCREENSHOT !== '1') await rm(SCREENSHOT);
    expect(consoleErrors).toEqual([]);

    // A reload replays the session's kept events: finished children keep their summary and missed steer.
    await page.reload();
    await page.waitForSelector('#conn[data-state="live"]', { timeout: UI_MS });
    await expect.poll(() => row(b).locator('div.missed').textContent(), { timeout: UI_MS }).toBe('missed steer: keep it short');
    await expect.poll(() => row(b1).locator('.summary').textContent(), { timeout: UI_MS }).toBe('notes on section 5');
    await expect.poll(() => row(d).locator('.summary').textContent(), { timeout: UI_MS }).toBe('done while you were away');
    expect(await page.locator('tr[data-subagent-id]').count()).toBe(final.length);
    await page.waitForSelector('#idle[data-idle="true"]', { timeout: UI_MS });
    expect(consoleErrors).toEqual([]);
  }, 120_000);
});
