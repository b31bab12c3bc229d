// The dashboard: sessions, the roster tree, the selected child's live tail, its steers and their
// fate, interrupt with confirmation, the stream's connection state and the idle badge. Every
// change goes through state.js's fold; render() only draws what the fold returns.
import { call, callOnce, childPath, follow, sessionPath } from './api.js';
import { elapsedSeconds, fold, initialState, isFinal, liveCount, queuedSteers, rosterTree, subtree, tailApply, tailInit, tailStale } from './state.js';

const STORE = 'subrun.sessions';

/** @type {{ sessions: Array<{ session_id: string, session_key: string | null, title: string }>, singleUser: boolean, current: string | null, selected: string | null, confirming: string | null, conn: { state: string, detail: string, resumes: number }, note: string }} */
const ui = { sessions: loadSessions(), singleUser: false, current: null, selected: null, confirming: null, conn: { state: 'idle', detail: '', resumes: 0 }, note: '' };
let state = initialState();
/** @type {ReturnType<typeof tailInit> | null} */
let tail = null;
/** @type {ReturnType<typeof follow> | null} */
let stream = null;
let tailBusy = false;
let tailWanted = false;
const askedEntries = new Set();

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

/**
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node | string | null | false | undefined)} kids
 */
function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids) if (kid !== null && kid !== false && kid !== undefined) el.append(kid);
  return el;
}

function loadSessions() {
  try {
    const list = JSON.parse(localStorage.getItem(STORE) ?? '[]');
    return Array.isArray(list) ? list.filter((s) => s && typeof s.session_id === 'string') : [];
  } catch {
    return [];
  }
}

function saveSessions() {
  localStorage.setItem(STORE, JSON.stringify(ui.sessions.filter((s) => s.session_key)));
}

/** @param {string} sid */
const keyOf = (sid) => ui.sessions.find((s) => s.session_id === sid)?.session_key ?? null;

function dispatch(/** @type {import('./state.js').Input} */ input) {
  state = fold(state, input);
  schedule();
}

// ---- sessions ----

async function refreshSingleUser() {
  // Asked only where the server says it lists sessions: a refused request is a console error.
  const caps = await call('GET', '/v1/capabilities').catch(() => null);
  if (caps?.body?.features?.single_user !== true) return;
  const r = await call('GET', '/v1/sessions').catch(() => null);
  if (!r || r.status !== 200 || !Array.isArray(r.body?.sessions)) return;
  ui.singleUser = true;
  for (const s of r.body.sessions) {
    if (!ui.sessions.some((x) => x.session_id === s.session_id)) ui.sessions.push({ session_id: s.session_id, session_key: null, title: s.title ?? '' });
  }
  schedule();
}

async function createSession(/** @type {string} */ title) {
  const r = await call('POST', '/v1/sessions', { body: title ? { title } : {} });
  if (r.status !== 201) return note(`create failed: ${r.body?.error?.message ?? r.status}`);
  ui.sessions.push({ session_id: r.body.session_id, session_key: r.body.session_key, title });
  saveSessions();
  openSession(r.body.session_id);
}

async function closeSession(/** @type {string} */ sid) {
  const r = await callOnce('DELETE', sessionPath(sid), { key: keyOf(sid) });
  if (r.status !== 200 && r.status !== 404) return note(`close failed: ${r.body?.error?.message ?? r.status}`);
  ui.sessions = ui.sessions.filter((s) => s.session_id !== sid);
  saveSessions();
  if (ui.current === sid) openSession(null);
  else schedule();
}

function openSession(/** @type {string | null} */ sid) {
  stream?.close();
  stream = null;
  state = initialState();
  tail = null;
  askedEntries.clear();
  ui.current = sid;
  ui.selected = null;
  ui.conn = { state: 'idle', detail: '', resumes: 0 };
  if (sid !== null) {
    stream = follow(sid, keyOf(sid), () => (state.synced ? state.seq : null), {
      onSnapshot(data, reset) {
        dispatch({ kind: 'snapshot', data, reset });
        void fetchEntries();
      },
      onEvent(event) {
        dispatch({ kind: 'event', event });
        if (tail && tailStale(tail, event)) void pullTail();
      },
      onState(s, detail) {
        if (s === 'live' && (ui.conn.state === 'reconnecting' || ui.conn.state === 'closed')) ui.conn.resumes++;
        ui.conn = { ...ui.conn, state: s, detail };
        if (s === 'closed') void checkGone(sid);
        schedule();
      },
    });
  }
  schedule();
}

/** The stream was refused: if the session itself is gone (closed, expired, a restarted server), stop following it. */
async function checkGone(/** @type {string} */ sid) {
  const r = await call('GET', sessionPath(sid), { key: keyOf(sid) }).catch(() => null);
  if (r?.status !== 404 || ui.current !== sid) return;
  stream?.close();
  stream = null;
  ui.conn = { ...ui.conn, state: 'closed', detail: 'the session is gone (closed, expired, or the server restarted)' };
  schedule();
}

/** A snapshot does not carry entries: fetch them for finished children shown without a summary. */
async function fetchEntries() {
  const sid = ui.current;
  if (!sid) return;
  const want = new Set();
  for (const c of Object.values(state.children)) if (isFinal(c.status) && c.summary === undefined && !askedEntries.has(c.delegation_id)) want.add(c.delegation_id);
  for (const did of want) {
    askedEntries.add(did);
    const r = await call('GET', `${sessionPath(sid)}/delegations/${encodeURIComponent(did)}`, { key: keyOf(sid) }).catch(() => null);
    if (ui.current === sid && r?.status === 200 && Array.isArray(r.body?.results)) dispatch({ kind: 'entries', results: r.body.results });
  }
}

// ---- the selected child's tail ----

function select(/** @type {string} */ cid) {
  ui.selected = cid;
  ui.confirming = null;
  tail = tailInit(cid);
  void pullTail();
  schedule();
}

async function pullTail() {
  if (!tail || !ui.current) return;
  if (tailBusy) {
    tailWanted = true;
    return;
  }
  tailBusy = true;
  const sid = ui.current;
  const asked = tail;
  const since = asked.loaded ? asked.offset : undefined;
  const q = since === undefined ? '' : `?since=${since}`;
  const r = await call('GET', `${childPath(sid, asked.subagent_id)}/tail${q}`, { key: keyOf(sid) }).catch(() => null);
  tailBusy = false;
  if (tail && tail.subagent_id === asked.subagent_id && ui.current === sid && r?.status === 200) {
    tail = tailApply(tail, since, r.body);
    schedule();
  }
  if (tailWanted) {
    tailWanted = false;
    void pullTail();
  }
}

// ---- steer and interrupt ----

async function steer(/** @type {string} */ cid, /** @type {string} */ text) {
  const sid = ui.current;
  if (!sid || !text.trim()) return;
  const key = crypto.randomUUID();
  dispatch({ kind: 'steer.sent', key, subagent_id: cid, text: text.trim() });
  let r;
  try {
    r = await callOnce('POST', `${childPath(sid, cid)}/steer`, { key: keyOf(sid), body: { text } });
  } catch {
    return dispatch({ kind: 'steer.answer', key, status: 'rejected', reason: 'no answer from the server' });
  }
  if (ui.current !== sid) return;
  if (r.status === 202 && r.body?.status === 'queued') dispatch({ kind: 'steer.answer', key, status: 'queued', steer_id: r.body.steer_id, text: r.body.text });
  else dispatch({ kind: 'steer.answer', key, status: 'rejected', reason: r.body?.error?.message ?? r.body?.status ?? `HTTP ${r.status}` });
}

async function interrupt(/** @type {string} */ cid) {
  const sid = ui.current;
  if (!sid) return;
  ui.confirming = null;
  const r = await callOnce('POST', `${childPath(sid, cid)}/interrupt`, { key: keyOf(sid), body: {} });
  note(r.status === 200 && r.body?.found ? `interrupt: stopping ${r.body.interrupted.length} (${r.body.interrupted.join(', ')})` : `interrupt: ${r.body?.error?.message ?? 'nothing live to stop'}`);
}

function note(/** @type {string} */ text) {
  ui.note = text;
  schedule();
}

// ---- rendering ----

let pending = false;
function schedule() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    render();
  });
}

function fmtSeconds(/** @type {number} */ s) {
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} m ${Math.round(s % 60)} s`;
}

/**
 * Redraws `el`'s content only when `sig` changed: a row or button under the pointer stays the same
 * element between renders (a click whose press and release land on different elements is lost).
 * @param {HTMLElement} el
 * @param {string} sig
 * @param {() => Array<Node | string>} build
 */
function patch(el, sig, build) {
  if (el.dataset.sig === sig) return;
  el.dataset.sig = sig;
  el.replaceChildren(...build());
}

/**
 * Keyed children: an item whose signature did not change keeps its element.
 * @template T
 * @param {HTMLElement} container
 * @param {readonly T[]} items
 * @param {(item: T) => string} key
 * @param {(item: T) => string} sig
 * @param {(item: T) => HTMLElement} build
 */
function keyed(container, items, key, sig, build) {
  /** @type {Map<string, HTMLElement>} */
  const old = new Map();
  for (const el of /** @type {HTMLElement[]} */ ([...container.children])) old.set(el.dataset.key ?? '', el);
  const els = items.map((item) => {
    const k = key(item);
    const s = sig(item);
    const el = old.get(k);
    if (el && el.dataset.sig === s) return el;
    const fresh = build(item);
    fresh.dataset.key = k;
    fresh.dataset.sig = s;
    return fresh;
  });
  const same = els.length === container.children.length && els.every((el, i) => container.children[i] === el);
  if (!same) container.replaceChildren(...els);
}

/**
 * Indents a tree cell through the CSSOM: a style attribute would break the page's CSP.
 * @param {HTMLElement} el
 * @param {number} depth
 */
function indent(el, depth) {
  el.style.paddingLeft = `${0.5 + depth * 1.4}rem`;
  return el;
}

function render() {
  const now = Date.now() / 1000;
  const conn = $('conn');
  conn.dataset.state = ui.conn.state;
  conn.textContent = `${ui.conn.state}${ui.conn.detail ? ` (${ui.conn.detail})` : ''} · seq ${state.seq}${ui.conn.resumes ? ` · resumed ${ui.conn.resumes}×` : ''}${state.gaps ? ` · ${state.gaps} gap(s)` : ''}`;
  const live = liveCount(state);
  const badge = $('idle');
  badge.hidden = ui.current === null;
  badge.dataset.idle = String(state.idle);
  badge.textContent = state.idle ? 'idle' : `${live} live`;
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
        h('button', { class: 'link', onclick: () => openSession(s.session_id) }, s.title || s.session_id),
        h('button', { class: 'small', title: 'close this session', onclick: () => void closeSession(s.session_id) }, 'close'),
      ),
  );
  $('single').hidden = !ui.singleUser;

  const rows = rosterTree(state);
  $('empty').hidden = rows.length > 0 || ui.current === null;
  const cells = (/** @type {import('./state.js').Child} */ c) => [
    String(c.depth),
    c.goal,
    c.status,
    fmtSeconds(elapsedSeconds(c, now)),
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
        { 'data-subagent-id': c.subagent_id, 'data-status': c.status, tabindex: 0, class: c.subagent_id === ui.selected ? 'selected' : '' },
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
          c.summary !== undefined ? h('div', { class: 'summary' }, c.summary) : null,
          c.error !== undefined ? h('div', { class: 'error' }, c.error) : null,
          c.missed_steer !== undefined ? h('div', { class: 'missed', 'data-missed': c.missed_steer }, `missed_steer: ${c.missed_steer}`) : null,
        ),
      );
    },
  );
  renderDetail();
  keyed(
    $('log'),
    state.log.slice(-60),
    (l) => String(l.seq),
    () => '',
    (l) => h('li', { 'data-seq': l.seq }, h('span', { class: 'seq' }, String(l.seq)), ` ${l.type}`, l.subagent_id ? ` ${l.subagent_id}` : '', l.text ? ` · ${l.text.slice(0, 80)}` : ''),
  );
}

function renderDetail() {
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
          h('button', { id: 'stop-confirm', class: 'danger', onclick: () => void interrupt(c.subagent_id) }, 'Yes, interrupt'),
          h('button', { onclick: () => ((ui.confirming = null), schedule()) }, 'Cancel'),
        )
      : h('button', { id: 'stop-ask', class: 'danger', disabled: isFinal(c.status), onclick: () => ((ui.confirming = c.subagent_id), schedule()) }, 'Interrupt (with subtree)'),
  ]);
  const mine = state.steers.filter((s) => s.subagent_id === c.subagent_id);
  patch($('steers'), JSON.stringify(mine), () =>
    mine.map((s) => h('li', { 'data-fate': s.fate, 'data-text': s.text }, h('span', { class: `fate ${s.fate}` }, s.fate), ` ${s.text}`, s.reason ? h('span', { class: 'reason' }, ` (${s.reason})`) : null, s.mine ? null : h('span', { class: 'reason' }, ' (another host)'))),
  );
}

// ---- wiring ----

function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const sid = hash.get('session');
  if (sid) {
    const key = hash.get('key');
    const known = ui.sessions.find((s) => s.session_id === sid);
    if (known) known.session_key = key ?? known.session_key;
    else ui.sessions.push({ session_id: sid, session_key: key, title: hash.get('title') ?? '' });
    saveSessions();
    // The key leaves the address bar (and the history), as the token did.
    history.replaceState(null, '', location.pathname);
  }
  $('create').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = /** @type {HTMLInputElement} */ ($('title'));
    void createSession(input.value.trim());
    input.value = '';
  });
  // Selection on press, not click: the row is the same element however often the roster redraws.
  const pick = (/** @type {Event} */ e) => {
    const tr = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (e.target).closest('tr[data-subagent-id]'));
    if (tr?.dataset.subagentId && tr.dataset.subagentId !== ui.selected) select(tr.dataset.subagentId);
  };
  $('roster').addEventListener('pointerdown', pick);
  $('roster').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') pick(e);
  });
  $('steer').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = /** @type {HTMLTextAreaElement} */ ($('steer-text'));
    if (ui.selected) void steer(ui.selected, input.value);
    input.value = '';
  });
  // Elapsed times move and a live child's tail may grow between events (a tool's result line).
  setInterval(() => {
    if (liveCount(state) > 0) schedule();
    if (tail && ui.selected && state.children[ui.selected] && !isFinal(state.children[ui.selected].status)) void pullTail();
  }, 1000);
  void refreshSingleUser();
  openSession(sid ?? ui.sessions[0]?.session_id ?? null);
}

start();
