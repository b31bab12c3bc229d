// `subrun demo --ui` as a person runs it: a real process that prints the dashboard's link, serves
// the page and the API behind it, plays the story as a host over HTTP and serves until Ctrl-C.
import { afterAll, describe, expect, it } from 'vitest';
import { killAll, runSubrun, spawnSubrun } from '../helpers/process.ts';

afterAll(killAll);

describe('subrun demo --ui', () => {
  it('prints a working dashboard link, plays the story on the server, and stops on SIGINT', async () => {
    const proc = spawnSubrun(['demo', '--ui', '--fast']);
    const line = await proc.stdout.take((l) => l.startsWith('subrun dashboard: '), 30_000, 'the dashboard link');
    const link = new URL(line.slice('subrun dashboard: '.length).trim());
    const token = link.searchParams.get('token') as string;
    const hash = new URLSearchParams(link.hash.slice(1));
    const sid = hash.get('session') as string;
    const key = hash.get('key') as string;
    expect(link.hostname).toBe('127.0.0.1');
    expect(link.pathname).toBe('/ui/');

    // The link logs the browser in: a cookie, and the token gone from the address.
    const login = await fetch(link, { redirect: 'manual' });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/ui/');
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const page = await fetch(new URL('/ui/', link), { headers: { Cookie: cookie } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('/ui/app.js');

    await proc.stdout.take((l) => l.includes('the story is over'), 30_000, 'the end of the story');
    const res = await fetch(new URL(`/v1/sessions/${sid}/subagents?include_finished=true`, link), {
      headers: { Authorization: `Bearer ${token}`, 'X-Subrun-Session-Key': key },
    });
    const { subagents } = (await res.json()) as { subagents: Array<{ subagent_id: string; parent_id: string | null; goal: string; status: string }> };
    const byGoal = Object.fromEntries(subagents.map((s) => [s.goal.split(':')[0], s]));
    expect(subagents).toHaveLength(4);
    expect(byGoal.research?.status).toBe('completed');
    expect(byGoal.summarize?.status).toBe('completed');
    expect(byGoal.crawl?.status).toBe('interrupted');
    expect(byGoal['crawl page 2']).toMatchObject({ status: 'interrupted', parent_id: byGoal.crawl?.subagent_id });
    // The steers went over HTTP: one delivered (no miss on research), one missed.
    expect(proc.stdout.all.join('\n')).toMatch(
      new RegExp(`${byGoal.summarize?.subagent_id} finished: completed \\(missed_steer: "Keep it under 100 words."\\)`),
    );
    expect(proc.stdout.all.join('\n')).toMatch(new RegExp(`${byGoal.research?.subagent_id} finished: completed\\n`));

    proc.child.kill('SIGINT');
    expect(await proc.waitExit()).toEqual({ code: 0, signal: null });
  }, 60_000);

  it.each([
    [['demo', '--ui', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm'], {}],
    [['demo', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm'], { SUBRUN_DEMO_UI: '1' }],
    [['demo'], { SUBRUN_DEMO_UI: 'maybe' }],
  ] as const)('refuses %j %j with exit 2 and one line', async (args, env) => {
    const r = await runSubrun(args, env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/--ui|SUBRUN_DEMO_UI/);
  });
});
