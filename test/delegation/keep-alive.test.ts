// A process that awaits a delegation stays alive until its entries are out, and one whose runtime
// has nothing left to run exits on its own: what the README's library example relies on. Each
// case is a real node process running the library from source.
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.ts';

interface Ran {
  readonly code: number | null;
  readonly stdout: string;
}

/** Runs `body` as an ES module importing the library as `subrun`; at most 20 s. */
function runScript(body: string): Promise<Ran> {
  const source = `import { createRuntime, scripted } from ${JSON.stringify(`${ROOT}src/index.ts`)};\n${body}`;
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], { cwd: ROOT, timeout: 20_000 }, (err, stdout) => {
      const code = err && typeof err.code === 'number' ? err.code : err ? null : 0;
      resolve({ code, stdout });
    });
  });
}

describe('keeping the process alive', () => {
  it('a process awaiting `results` lives until every child has finished (nothing else holds it open)', async () => {
    const ran = await runScript(`
      const runtime = createRuntime({ max_concurrent_children: 2 });
      const { results } = runtime.delegate([
        { goal: 'sleeps', runner: scripted([{ op: 'sleep', ms: 300 }, { op: 'finish', summary: 'slept' }]) },
        { goal: 'works', runner: scripted([{ op: 'tool', name: 'read_file', ms: 200 }, { op: 'say', text: 'done' }]) },
      ]);
      for (const entry of await results) console.log(entry.status, entry.summary);
    `);
    expect(ran).toEqual({ code: 0, stdout: 'completed slept\ncompleted done\n' });
  });

  it('an interrupted child still lets the awaiting process see its entry', async () => {
    const ran = await runScript(`
      const runtime = createRuntime();
      const { subagent_ids, results } = runtime.delegate([{ goal: 'waits', runner: scripted([{ op: 'wait_steer' }]) }]);
      setTimeout(() => runtime.interrupt(subagent_ids[0]), 100).unref();
      console.log((await results)[0].status);
    `);
    expect(ran).toEqual({ code: 0, stdout: 'interrupted\n' });
  });

  it('a runtime with no children left keeps nothing alive: the process exits on its own', async () => {
    const ran = await runScript(`
      const runtime = createRuntime();
      await runtime.delegate([{ goal: 'quick', runner: scripted([{ op: 'say', text: 'hi' }]) }]).results;
      // A child with a long timeout that has finished leaves no timer holding the process either.
      await runtime.delegate([{ goal: 'timed', runner: scripted([{ op: 'say', text: 'hi' }]) }], { timeout_ms: 3_600_000 }).results;
      createRuntime();
      console.log('idle');
    `);
    expect(ran).toEqual({ code: 0, stdout: 'idle\n' });
  });
});
