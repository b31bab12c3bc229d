// The dashboard as the page a person leaves open, in Chromium (Debian's, driven by playwright-core)
// against a real `subrun serve --ws`: it asks for the token (none, a wrong one: said so, never raw
// JSON; the right one: in), opens a session made elsewhere by id and key (its history in the Events
// pane, another host's steers with their fates, a missed steer once), spawns from its form, and
// fits a 420 px viewport without sideways scrolling.
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { killAll, scriptedTask, startWsServer, type WsServer } from '../helpers/process.ts';

const CHROMIUM = [process.env.CHROMIUM, '/usr/lib/chromium/chromium', '/usr/bin/chromium'].find((p): p is string => typeof p === 'string' && existsSync(p));
const UI_MS = 15_000;
/** What Chromium logs for any answer 401, the page's own probe included: expected where no login is held. */
const REFUSED = /status of 401/;

let server: WsServer;
let browser: Browser;
let base: string;

beforeAll(async () => {
  if (!CHROMIUM) throw new Error('no Chromium: apt-get install chromium (or set CHROMIUM to a Chromium or Chrome binary)');
  server = await startWsServer(['--max-spawn-depth', '2']);
  base = `http://127.0.0.1:${server.port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await killAll();
});

async function api(method: string, path: string, key?: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${server.token}`,
      ...(key ? { 'X-Subrun-Session-Key': key } : {}),
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A fresh browser profile (no cookie, no stored sessions) and its console errors. */
async function fresh(viewport = { width: 1280, height: 860 }): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  return { context, page, errors };
}

const noRawJson = async (page: Page) => {
  const text = (await page.locator('body').innerText()) + (await page.content());
  expect(text).not.toContain('{"error"');
  expect(text).not.toContain('4007');
};

describe('the dashboard page in Chromium', () => {
  it('asks for the token: none, a wrong one (said so, no raw JSON), then the right one', async () => {
    const { context, page, errors } = await fresh();
    await page.goto(`${base}/ui/`);
    await page.locator('#login').waitFor({ state: 'visible', timeout: UI_MS });
    expect(await page.locator('#main').isHidden()).toBe(true);
    expect(await page.locator('#login-why').textContent()).toContain('needs its token');
    await noRawJson(page);

    // A wrong token, typed, and the printed link's placeholder pasted as it is: both said wrong.
    await page.fill('#login-token', 'not-the-token');
    await page.click('#login-send');
    await page.locator('#login-why').filter({ hasText: 'not this server' }).waitFor({ timeout: UI_MS });
    expect(new URL(page.url()).search).toBe('');
    await noRawJson(page);
    await page.goto(`${base}/ui/?token=${encodeURIComponent('<your --token>')}`);
    await page.locator('#login-why').filter({ hasText: 'not this server' }).waitFor({ timeout: UI_MS });
    expect(new URL(page.url()).search).toBe('');
    await noRawJson(page);

    await page.fill('#login-token', server.token);
    await page.click('#login-send');
    await page.locator('#main').waitFor({ state: 'visible', timeout: UI_MS });
    expect(await page.locator('#login').isHidden()).toBe(true);
    expect(new URL(page.url()).search).toBe('');
    await page.locator('#no-sessions').waitFor({ state: 'visible', timeout: UI_MS });
    await page.locator('#open').waitFor({ state: 'visible', timeout: UI_MS });
    expect(errors.filter((e) => !REFUSED.test(e))).toEqual([]);
    await context.close();
  });

  it('opens a session made elsewhere by id and key: its history, every steer with its fate, a missed one once; spawns from its form', async () => {
    // Made with the API, as `subrun call` or curl would: the parent waits for its helper inside a
    // spawn step (no delivery point), so a steer to it misses; the helper takes one.
    const s = (await api('POST', '/v1/sessions', undefined, { title: 'made elsewhere' })).body as { session_id: string; session_key: string };
    const d = await api('POST', `/v1/sessions/${s.session_id}/delegations`, s.session_key, {
      tasks: [
        scriptedTask('parent: waits for its helper', [
          { op: 'spawn', tasks: [scriptedTask('helper: waits for guidance', [{ op: 'wait_steer' }, { op: 'finish', summary: 'guided' }])] },
          { op: 'finish', summary: 'the parent is done' },
        ]),
        scriptedTask('waiter: never takes a steer', [{ op: 'hang' }]),
      ],
    });
    const [parent, waiter] = d.body.subagent_ids as [string, string];
    const kids = async () =>
      (await api('GET', `/v1/sessions/${s.session_id}/subagents`, s.session_key)).body.subagents as Array<{ subagent_id: string; parent_id: string | null }>;
    let helper: string | undefined;
    await expect.poll(async () => (helper = (await kids()).find((k) => k.parent_id === parent)?.subagent_id), { timeout: UI_MS }).toBeTruthy();
    expect((await api('POST', `/v1/sessions/${s.session_id}/subagents/${parent}/steer`, s.session_key, { text: 'keep it short' })).status).toBe(202);
    expect((await api('POST', `/v1/sessions/${s.session_id}/subagents/${helper!}/steer`, s.session_key, { text: 'focus' })).status).toBe(202);
    expect((await api('POST', `/v1/sessions/${s.session_id}/subagents/${waiter}/steer`, s.session_key, { text: 'still waiting' })).status).toBe(202);

    const { context, page, errors } = await fresh();
    await page.goto(`${base}/ui/?token=${encodeURIComponent(server.token)}`);
    await page.locator('#main').waitFor({ state: 'visible', timeout: UI_MS });
    expect(await page.locator(`#sessions li[data-session-id="${s.session_id}"]`).count()).toBe(0);
    await page.fill('#open-id', s.session_id);
    await page.fill('#open-key', s.session_key);
    await page.click('#open-send');
    await page.locator(`#sessions li[data-session-id="${s.session_id}"]`).waitFor({ timeout: UI_MS });
    const row = (id: string) => page.locator(`tr[data-subagent-id="${id}"]`);
    await page.waitForSelector(`tr[data-subagent-id="${parent}"][data-status="completed"]`, { timeout: UI_MS });
    // The Events pane holds the session's history from its first event.
    await expect.poll(() => page.locator('#log li[data-seq="1"]').count(), { timeout: UI_MS }).toBe(1);
    // The missed steer: once in the outcome, once in the steer list, with its fate.
    await expect.poll(() => row(parent).locator('div.missed').textContent(), { timeout: UI_MS }).toBe('missed steer: keep it short');
    expect(await row(parent).locator('.summary').textContent()).toBe('the parent is done');
    expect(((await row(parent).locator('.outcome').textContent()) ?? '').split('keep it short').length).toBe(2);
    await page.locator('#pick-hint').waitFor({ state: 'visible', timeout: UI_MS });
    await row(parent).click();
    await page.waitForSelector('#steers li[data-text="keep it short"][data-fate="missed"]', { timeout: UI_MS });
    expect(await page.locator('#steers li').count()).toBe(1);
    await row(helper!).click();
    await page.waitForSelector('#steers li[data-text="focus"][data-fate="delivered"]', { timeout: UI_MS });
    // Another host's steer still waiting shows as queued.
    await row(waiter).click();
    await page.waitForSelector(`#steers li[data-fate="queued"]`, { timeout: UI_MS });
    const tl = page.getByRole('region', { name: 'Timeline' });
    await tl.locator(`[data-fate="queued"][data-subagent-id="${waiter}"]`).waitFor({ timeout: UI_MS });

    // The spawn form: two scripted children, one per line, that appear in the tree and finish.
    await page.fill('#spawn-goals', 'first from the form\nsecond from the form');
    await page.selectOption('#spawn-agent', 'scripted');
    await page.fill('#spawn-steps', '[{"op": "tool", "name": "check"}, {"op": "finish", "summary": "checked"}]');
    await page.click('#spawn-send');
    await page.locator('#spawn-hint').filter({ hasText: 'spawned 2' }).waitFor({ timeout: UI_MS });
    for (const goal of ['first from the form', 'second from the form']) {
      const made = page.locator('tr[data-subagent-id]', { hasText: goal });
      await made.locator('.summary', { hasText: 'checked' }).waitFor({ timeout: UI_MS });
      expect(await made.getAttribute('data-status')).toBe('completed');
    }
    // A bad form is said in words, and nothing is spawned.
    await page.fill('#spawn-goals', 'third');
    await page.fill('#spawn-steps', '[{"op": ');
    await page.click('#spawn-send');
    await page.locator('#spawn-hint').filter({ hasText: 'not JSON' }).waitFor({ timeout: UI_MS });
    expect(errors).toEqual([]);
    await context.close();
    await api('POST', `/v1/sessions/${s.session_id}/subagents/${waiter}/interrupt`, s.session_key, {});
  });

  it('fits a 420 px viewport: no sideways scrolling, with the token prompt and with a session open', async () => {
    const { context, page, errors } = await fresh({ width: 420, height: 800 });
    const fits = () => page.evaluate<number>('document.documentElement.scrollWidth');
    await page.goto(`${base}/ui/`);
    await page.locator('#login').waitFor({ state: 'visible', timeout: UI_MS });
    expect(await fits()).toBeLessThanOrEqual(420);

    const s = (await api('POST', '/v1/sessions', undefined, { title: 'a long title for a narrow screen that goes on' })).body as {
      session_id: string;
      session_key: string;
    };
    const d = await api('POST', `/v1/sessions/${s.session_id}/delegations`, s.session_key, {
      tasks: [
        scriptedTask('a goal long enough to wrap several times on a phone-sized screen, with_a_very_long_unbroken_identifier_inside_it', [
          { op: 'tool', name: 'a_tool_with_a_rather_long_name' },
          { op: 'spawn', tasks: [scriptedTask('nested deeper', [{ op: 'hang' }])] },
        ]),
      ],
    });
    const [id] = d.body.subagent_ids as [string];
    await page.goto(`${base}/ui/?token=${encodeURIComponent(server.token)}#session=${s.session_id}&key=${s.session_key}`);
    await page.waitForSelector(`tr[data-subagent-id="${id}"][data-status="running"]`, { timeout: UI_MS });
    await page.locator(`tr[data-subagent-id="${id}"]`).click();
    await page.locator('#detail').waitFor({ state: 'visible', timeout: UI_MS });
    await page.getByRole('region', { name: 'Timeline' }).locator(`[data-subagent-id="${id}"][data-status="running"]`).waitFor({ timeout: UI_MS });
    expect(await fits()).toBeLessThanOrEqual(420);
    expect(errors.filter((e) => !REFUSED.test(e))).toEqual([]);
    await context.close();
    await api('DELETE', `/v1/sessions/${s.session_id}`, s.session_key);
  });
});
