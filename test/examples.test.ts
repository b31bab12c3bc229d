// The three programs in examples/, run as a reader runs them (`npx tsx examples/NAME.ts` right
// after `npm ci`; the package imported by its name), their output checked: the library on the scripted runner, a host
// over WebSocket against a real `subrun serve` process, and a parent agent on a model (here the
// local fake OpenAI-compatible server, chosen the way a reader chooses a real one: by env vars).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answer, callTools, FakeModel, type RecordedRequest } from './helpers/fake-model.ts';
import { ModelRouter } from './helpers/model-router.ts';
import { cleanEnv, ROOT } from './helpers/process.ts';

function runExample(file: string, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(join(ROOT, 'node_modules', '.bin', 'tsx'), [join('examples', file)], { cwd: ROOT, env: cleanEnv(env), timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe('examples/', () => {
  it('library.ts: delegates in-process, steers one child, interrupts the other, and a late steer says why', async () => {
    const r = await runExample('library.ts');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      'steer: queued',
      'interrupt: 1 child',
      '  read the spec: used read_file',
      '  read the spec: took the steer "focus on section 5"',
      'reader  completed   "read it"',
      'drafter interrupted ""',
      'late steer: finished',
      '',
    ]);
  });

  it('ws-host.ts: spawns, steers, interrupts and reads completions against a real subrun serve --ws', async () => {
    const r = await runExample('ws-host.ts');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // Events may come before the reply of the call that caused them: the lines, not their order.
    expect(r.stdout.split('\n').sort()).toEqual(
      [
        'steer: queued',
        'interrupt: true',
        'delivered to listens: "wrap up"',
        'complete: listens completed "heard you"',
        'complete: hangs interrupted ""',
        'results: completed, interrupted',
        'tail of listens: "[completed] heard you"',
        '',
      ].sort(),
    );
  });

  describe('model-parent.ts', () => {
    let model: FakeModel;
    beforeAll(async () => {
      model = await FakeModel.start();
    });
    afterAll(() => model.close());

    it('says what it needs without a model', async () => {
      const r = await runExample('model-parent.ts');
      expect(r.code).toBe(2);
      expect(r.stderr).toBe('set SUBRUN_BASE_URL and SUBRUN_MODEL (and SUBRUN_API_KEY if the server needs one)\n');
    });

    it('a parent on the model delegates to a child on the model and answers with its report', async () => {
      const router = new ModelRouter(model);
      const reported = (req: RecordedRequest) => req.body.messages.some((m) => m.role === 'user' && String(m.content).startsWith('[subagent '));
      const parentGoal = 'Find out which example programs are in this folder.';
      // The parent asks for a child, then waits (the child's report arrives as a message), then answers.
      const parent = (req: RecordedRequest) =>
        req.body.messages.some((m) => m.role === 'tool')
          ? answer(reported(req) ? 'There are three: library, ws-host and model-parent.' : 'waiting for the listing')
          : callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'list the example programs' }] }, id: 'call_1' }]);
      router.child(`${parentGoal} Delegate the listing to one subagent with delegate_task, then answer in one sentence.`, parent, parent, parent);
      router.child('list the example programs', answer('library.ts, model-parent.ts, ws-host.ts'));
      const r = await runExample('model-parent.ts', { SUBRUN_BASE_URL: model.url, SUBRUN_MODEL: 'fake' });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout.split('\n')).toEqual([
        'child spawned: list the example programs',
        'child completed: library.ts, model-parent.ts, ws-host.ts',
        expect.stringMatching(/^parent completed after [23] model calls: There are three: library, ws-host and model-parent\.$/),
        '',
      ]);
      // The child ran on the model the env var named, with the goal its parent gave it.
      expect(router.childRequests.get('list the example programs')?.[0]?.body.model).toBe('fake');
    });
  });
});
