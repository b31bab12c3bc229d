// The dashboard's drawing: header, sessions, the roster tree, the selected child's detail (tail,
// steers, interrupt) and the event log, from the folded state and the page's own view state.
// Nothing here changes state: each button calls back into app.js.
import { h, indent, keyed, patch } from './dom.js';
import { elapsedSeconds, isFinal, liveCount, queuedSteers, rosterTree, subtree } from './state.js';
import { fmtSpan } from './timeline.js';

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

/**
 * @typedef {{ session_id: string, session_key: string | null, title: string }} KnownSession
 * @typedef {{ sessions: KnownSession[], singleUser: boolean, current: string | null, selected: string | null,
 *   confirming: string | null, conn: { state: string, detail: string, resumes: number }, note: string, login: string | null }} Ui
 * @typedef {{ open(sid: string): void, close(sid: string): void, interrupt(cid: string): void, confirm(cid: string | null): void }} Actions
 */

/**
 * A completion's text without the note that repeats its missed steer: the row shows that steer
 * once, with its fate, beside it.
 * @param {string} text
 * @param {string | undefined} missed
 */
export function withoutMissedNote(text, missed) {
  if (missed === undefined) return text;
  for (const note of [
    `\n\n[steer did not land — the subagent finished before it could be delivered: ${missed}]`,
    ` [steer did not land before the subagent stopped: ${missed}]`,
    `[steer did not land before the subagent stopped: ${missed}]`,
  ]) {
    if (text.endsWith(note)) return text.slice(0, text.length - note.length);
  }
  return text;
}

/**
 * @param {Ui} ui
 * @param {import('./state.js').State} state
 * @param {ReturnType<typeof import('./state.js').tailInit> | null} tail
 * @param {Actions} act
 */
export function renderPage(ui, state, tail, act) {
  const now = Date.now() / 1000;
  $('login').hidden = ui.login === null;
  $('main').hidden = ui.login !== null;
  $('login-why').textContent = ui.login ?? '';
  const conn = $('conn');
  conn.dataset.state = ui.conn.state;
  conn.textContent = `${ui.conn.state}${ui.conn.detail ? ` (${ui.conn.detail})` : ''} · seq ${state.seq}${ui.conn.resumes ? ` · resumed ${ui.conn.resumes}×` : ''}${state.gaps ? ` · ${state.gaps} gap(s)` : ''}`;
  const badge = $('idle');
  badge.hidden = ui.current === null;
  badge.dataset.idle = String(state.idle);
  badge.textContent = state.idle ? 'idle' : `${liveCount(state)} live`;
  $('note').textContent = ui.note;

  keyed(
    $('sessions'),
    ui.sessions,
    (s) => s.session_id,
    (s) => `${s.title}|${s.session_id === ui.current}`,
    (s) =>
      h(
        'li',
        { 'data-session-id': s.session_id, class: s.session_id === ui.current ? 'current' : '' },
        h('button', { class: 'link', title: s.session_id, onclick: () => act.open(s.session_id) }, s.title || s.session_id),
        h('button', { class: 'small', title: 'close this session (stops its children)', onclick: () => act.close(s.session_id) }, 'close'),
      ),
  );
  $('single').hidden = !ui.singleUser;
  $('no-sessions').hidden = ui.sessions.length > 0;
  /** @type {HTMLButtonElement} */ ($('spawn-send')).disabled = ui.current === null;
  $('spawn').hidden = ui.current === null;

  const rows = rosterTree(state);
  $('empty').hidden = rows.length > 0 || ui.current === null;
  $('pick-hint').hidden = rows.length === 0 || ui.selected !== null;
  const cells = (/** @type {import('./state.js').Child} */ c) => [
    String(c.depth),
    c.goal,
    c.status,
    fmtSpan(elapsedSeconds(c, now)),
    String(c.tool_count),
    c.last_tool || '–',
    c.accepting_steer ? 'yes' : 'no',
    String(queuedSteers(state, c.subagent_id)),
    c.summary ?? '',
    c.error ?? '',
    c.missed_steer ?? '\u0000',
    String(c.subagent_id === ui.selected),
  ];
  keyed(
    $('roster'),
    rows,
    (c) => c.subagent_id,
    (c) => JSON.stringify(cells(c)),
    (c) => {
      const [, , , elapsed, tools, lastTool, steerable, queued] = cells(c);
      return h(
        'tr',
        { 'data-subagent-id': c.subagent_id, 'data-status': c.status, tabindex: 0, class: c.subagent_id === ui.selected ? 'selected' : '', title: 'show its live tail, steer or stop it' },
        indent(h('td', { class: 'goal' }, c.depth > 0 ? '└ ' : '', c.goal, h('div', { class: 'id' }, c.subagent_id)), c.depth),
        h('td', {}, h('span', { class: `status ${c.status}` }, c.status)),
        h('td', { class: 'num' }, elapsed),
        h('td', { class: 'num' }, tools),
        h('td', {}, lastTool),
        h('td', {}, steerable),
        h('td', { class: 'num' }, queued),
        h(
          'td',
          { class: 'outcome' },
          c.summary !== undefined ? h('div', { class: 'summary' }, withoutMissedNote(c.summary, c.missed_steer)) : null,
          c.error !== undefined ? h('div', { class: 'error' }, withoutMissedNote(c.error, c.missed_steer)) : null,
          c.missed_steer !== undefined ? h('div', { class: 'missed', 'data-missed': c.missed_steer }, h('span', { class: 'fate missed' }, 'missed'), ` steer: ${c.missed_steer}`) : null,
        ),
      );
    },
  );
  renderDetail(ui, state, tail, act);
  keyed(
    $('log'),
    state.log.slice(-60),
    (l) => String(l.seq),
    () => '',
    (l) => h('li', { 'data-seq': l.seq }, h('span', { class: 'seq' }, String(l.seq)), ` ${l.type}`, l.subagent_id ? ` ${l.subagent_id}` : '', l.text ? ` · ${l.text.slice(0, 80)}` : ''),
  );
}

/**
 * @param {Ui} ui
 * @param {import('./state.js').State} state
 * @param {ReturnType<typeof import('./state.js').tailInit> | null} tail
 * @param {Actions} act
 */
function renderDetail(ui, state, tail, act) {
  const c = ui.selected ? state.children[ui.selected] : undefined;
  const box = $('detail');
  box.hidden = !c;
  if (!c) return;
  $('detail-title').textContent = `${c.goal} · ${c.subagent_id} · ${c.status}`;
  const pre = $('tail');
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  if (pre.textContent !== (tail?.text ?? '')) pre.textContent = tail?.text ?? '';
  if (atEnd) pre.scrollTop = pre.scrollHeight;
  $('tail-meta').textContent = tail?.loaded ? `offset ${tail.offset} · seq ${tail.seq}` : 'loading…';
  const steerable = c.accepting_steer && !isFinal(c.status);
  /** @type {HTMLButtonElement} */ ($('steer-send')).disabled = !steerable;
  $('steer-hint').textContent = steerable ? '' : 'this subagent no longer takes steers';
  const ids = subtree(state, c.subagent_id);
  const confirming = ui.confirming === c.subagent_id;
  patch($('stop'), JSON.stringify([c.subagent_id, confirming, isFinal(c.status), ids.length]), () => [
    confirming
      ? h(
          'span',
          { class: 'confirm' },
          `Stop ${c.subagent_id}${ids.length > 1 ? ` and ${ids.length - 1} descendant(s)` : ''}? `,
          h('button', { id: 'stop-confirm', class: 'danger', onclick: () => act.interrupt(c.subagent_id) }, 'Yes, interrupt'),
          h('button', { onclick: () => act.confirm(null) }, 'Cancel'),
        )
      : h('button', { id: 'stop-ask', class: 'danger', disabled: isFinal(c.status), onclick: () => act.confirm(c.subagent_id) }, 'Interrupt (with subtree)'),
  ]);
  const mine = state.steers.filter((s) => s.subagent_id === c.subagent_id);
  patch($('steers'), JSON.stringify(mine), () =>
    mine.map((s) =>
      h(
        'li',
        { 'data-fate': s.fate, 'data-text': s.text, 'data-steer-id': s.steer_id },
        h('span', { class: `fate ${s.fate}` }, s.fate),
        ` ${s.text || '(its text shows once it is delivered or missed)'}`,
        s.reason ? h('span', { class: 'reason' }, ` (${s.reason})`) : null,
        s.mine ? null : h('span', { class: 'reason' }, ' (another host)'),
      ),
    ),
  );
}
