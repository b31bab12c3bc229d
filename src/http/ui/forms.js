// What the page's forms send and how an answer reads to a person: the spawn form's tasks, an
// error answer as one sentence (never the raw JSON), and the token prompt's reasons.

/**
 * The tasks of the spawn form: one child per non-empty line of goals, each with the chosen runner.
 * @param {string} goals
 * @param {string} kind `default` or `scripted`
 * @param {string} steps a JSON list of scripted steps (for `scripted`)
 * @returns {{ tasks: Array<Record<string, unknown>> } | { error: string }}
 */
export function spawnTasks(goals, kind, steps) {
  const lines = goals
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  if (lines.length === 0) return { error: 'Give at least one goal (one child per line).' };
  if (kind !== 'scripted') return { tasks: lines.map((goal) => ({ goal })) };
  let parsed;
  try {
    parsed = JSON.parse(steps.trim() === '' ? '[]' : steps);
  } catch (err) {
    return { error: `The steps are not JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (!Array.isArray(parsed)) return { error: 'The steps must be a JSON list, e.g. [{"op": "say", "text": "hi"}].' };
  return { tasks: lines.map((goal) => ({ goal, agent: { kind: 'scripted', steps: parsed } })) };
}

/**
 * An error answer as a person reads it: the server's message, what it found wrong, and what to do.
 * @param {{ status: number, body: any }} r
 */
export function errorText(r) {
  const e = r.body && typeof r.body === 'object' && r.body.error && typeof r.body.error === 'object' ? r.body.error : null;
  if (r.status === 401) return 'The server does not accept this browser’s login: open the dashboard with its token.';
  if (r.status === 404) return 'Not found: the session is closed or expired, or its id or key is wrong.';
  const message = e && typeof e.message === 'string' ? e.message : `the server answered ${r.status}`;
  const issues = e && e.data && Array.isArray(e.data.issues) ? e.data.issues.map((/** @type {any} */ i) => `${i.path ?? ''}: ${i.message ?? ''}`).join('; ') : '';
  return `${message.charAt(0).toUpperCase()}${message.slice(1)}${issues ? ` (${issues})` : ''}.`;
}

/** Why the page asks for the token. */
export const LOGIN_WHY = Object.freeze({
  missing: 'This server needs its token before it shows anything.',
  wrong: 'That token is not this server’s: check it (the whole line after “subrun token:”) and try again.',
  expired: 'The server no longer accepts this browser’s login (it restarted with another token?): give its token again.',
});
