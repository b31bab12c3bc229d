// The dashboard: the token prompt, sessions (made here, or opened by id and key), the roster
// tree, the selected child's live tail, every steer with its fate, interrupt with confirmation, a
// spawn form, the Timeline, the stream's connection state and the idle badge. Every change goes
// through state.js's fold; render.js and timeline-view.js only draw what comes out.
import { auth, call, callOnce, childPath, follow, sessionPath } from './api.js';
import { errorText, LOGIN_WHY, spawnTasks } from './forms.js';
import { renderPage } from './render.js';
import { fold, initialState, isFinal, liveCount, tailApply, tailInit, tailStale } from './state.js';
import { isTimeline, timelineLayout } from './timeline.js';
import { legend, renderTimeline } from './timeline-view.js';

const STORE = 'subrun.sessions';
/** The Timeline is fetched at most this often (4 a second). */
const TIMELINE_MS = 250;
/** Events after which the Timeline changes (a tool or a line of text moves no bar). */
const TIMELINE_EVENTS = new Set(['subagent.spawn_requested', 'subagent.start', 'subagent.steer.delivered', 'subagent.complete', 'delegation.dispatched']);

/** @type {import('./render.js').Ui} */
const ui = { sessions: loadSessions(), singleUser: false, current: null, selected: null, confirming: null, conn: { state: 'idle', detail: '', resumes: 0 }, note: '', login: null };
let state = initialState();
/** @type {ReturnType<typeof tailInit> | null} */
let tail = null;
/** @type {ReturnType<typeof follow> | null} */
let stream = null;
let tailBusy = false;
let tailWanted = false;
const askedEntries = new Set();
/** The latest timeline answer, and this page's clock when it came (its `now` moves on from there). */
/** @type {{ data: import('./timeline.js').TimelineData, at: number } | null} */
let timeline = null;
const tl = { busy: false, wanted: false, last: 0, timer: /** @type {ReturnType<typeof setTimeout> | undefined} */ (undefined) };

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

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

// ---- the token ----

/** Asks for the token (and stops following anything until the server lets this browser in). */
function askToken(/** @type {string} */ why) {
  if (ui.login !== null && why === LOGIN_WHY.expired) return;
  ui.login = why;
  stream?.close();
  stream = null;
  schedule();
  queueMicrotask(() => $('login-token').focus());
}

// ---- sessions ----

async function refreshSingleUser() {
  // Asked only where the server says it lists sessions: a refused request is a console error.
  const caps = await call('GET', '/v1/capabilities').catch(() => null);
  if (caps?.status === 401) return false;
  if (caps?.body?.features?.single_user === true) {
    const r = await call('GET', '/v1/sessions').catch(() => null);
    if (r && r.status === 200 && Array.isArray(r.body?.sessions)) {
      ui.singleUser = true;
      for (const s of r.body.sessions) {
        if (!ui.sessions.some((x) => x.session_id === s.session_id)) ui.sessions.push({ session_id: s.session_id, session_key: null, title: s.title ?? '' });
      }
    }
  }
  schedule();
  return true;
}

async function createSession(/** @type {string} */ title) {
  const r = await call('POST', '/v1/sessions', { body: title ? { title } : {} });
  if (r.status !== 201) return note(`create failed: ${errorText(r)}`);
  ui.sessions.push({ session_id: r.body.session_id, session_key: r.body.session_key, title });
  saveSessions();
  openSession(r.body.session_id);
}

/** A session made elsewhere, by its id and key: checked first, kept only if the server knows it. */
async function openById(/** @type {string} */ sid, /** @type {string} */ key) {
  const r = await call('GET', sessionPath(sid), { key: key || null }).catch(() => null);
  if (!r || r.status !== 200) return void ($('open-hint').textContent = r ? errorText(r) : 'No answer from the server.');
  $('open-hint').textContent = '';
  const known = ui.sessions.find((s) => s.session_id === sid);
  if (known) known.session_key = key || known.session_key;
  else ui.sessions.push({ session_id: sid, session_key: key || null, title: r.body?.title ?? '' });
  saveSessions();
  openSession(sid);
}

async function closeSession(/** @type {string} */ sid) {
  const r = await callOnce('DELETE', sessionPath(sid), { key: keyOf(sid) });
  if (r.status !== 200 && r.status !== 404) return note(`close failed: ${errorText(r)}`);
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
  timeline = null;
  askedEntries.clear();
  ui.current = sid;
  ui.selected = null;
  ui.conn = { state: 'idle', detail: '', resumes: 0 };
  if (sid !== null) {
    // From seq 0: the session's kept events replay first (a session made elsewhere shows its
    // history in the Events pane); a ring that no longer reaches back answers with a snapshot.
    stream = follow(sid, keyOf(sid), () => state.seq, {
      onSnapshot(data, reset) {
        dispatch({ kind: 'snapshot', data, reset });
        void fetchEntries();
        pullTimeline();
      },
      onEvent(event) {
        dispatch({ kind: 'event', event });
        if (tail && tailStale(tail, event)) void pullTail();
        if (TIMELINE_EVENTS.has(event.type)) pullTimeline();
      },
      onState(s, detail) {
        if (s === 'live' && (ui.conn.state === 'reconnecting' || ui.conn.state === 'closed')) ui.conn.resumes++;
        ui.conn = { ...ui.conn, state: s, detail };
        if (s === 'closed') void checkGone(sid);
        schedule();
      },
    });
    pullTimeline();
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

// ---- the Timeline: fetched on open, after events that change it, each second while a child runs ----

function pullTimeline() {
  if (tl.busy) return void (tl.wanted = true);
  const wait = tl.last + TIMELINE_MS - Date.now();
  if (wait > 0) {
    tl.timer ??= setTimeout(() => {
      tl.timer = undefined;
      pullTimeline();
    }, wait);
    return;
  }
  const sid = ui.current;
  if (!sid) return;
  tl.busy = true;
  tl.last = Date.now();
  void call('GET', `${sessionPath(sid)}/timeline`, { key: keyOf(sid) })
    .catch(() => null)
    .then((r) => {
      tl.busy = false;
      if (ui.current === sid && r?.status === 200 && isTimeline(r.body)) {
        timeline = { data: r.body, at: Date.now() / 1000 };
        dispatch({ kind: 'timeline', data: r.body });
      }
      if (tl.wanted) {
        tl.wanted = false;
        pullTimeline();
      }
    });
}

// ---- the selected child's tail ----

function select(/** @type {string} */ cid) {
  if (cid === ui.selected) return;
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

// ---- spawn, steer and interrupt ----

async function spawnFromForm() {
  const sid = ui.current;
  if (!sid) return;
  const hint = $('spawn-hint');
  const made = spawnTasks(/** @type {HTMLTextAreaElement} */ ($('spawn-goals')).value, /** @type {HTMLSelectElement} */ ($('spawn-agent')).value, /** @type {HTMLTextAreaElement} */ ($('spawn-steps')).value);
  if ('error' in made) return void (hint.textContent = made.error);
  hint.textContent = 'spawning…';
  const r = await callOnce('POST', `${sessionPath(sid)}/delegations`, { key: keyOf(sid), body: { tasks: made.tasks } }).catch(() => null);
  if (!r) return void (hint.textContent = 'No answer from the server.');
  if (r.status !== 202) return void (hint.textContent = errorText(r));
  hint.textContent = `spawned ${r.body.count} (${r.body.delegation_id})`;
  /** @type {HTMLTextAreaElement} */ ($('spawn-goals')).value = '';
}

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
  pullTimeline();
}

async function interrupt(/** @type {string} */ cid) {
  const sid = ui.current;
  if (!sid) return;
  ui.confirming = null;
  const r = await callOnce('POST', `${childPath(sid, cid)}/interrupt`, { key: keyOf(sid), body: {} });
  note(r.status === 200 && r.body?.found ? `interrupt: stopping ${r.body.interrupted.length} (${r.body.interrupted.join(', ')})` : `interrupt: ${r.status === 200 ? 'nothing live to stop' : errorText(r)}`);
  pullTimeline();
}

function note(/** @type {string} */ text) {
  ui.note = text;
  schedule();
}

// ---- rendering ----

/** @type {import('./render.js').Actions} */
const actions = {
  open: (sid) => openSession(sid),
  close: (sid) => void closeSession(sid),
  interrupt: (cid) => void interrupt(cid),
  confirm: (cid) => {
    ui.confirming = cid;
    schedule();
  },
};

let pending = false;
function schedule() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    renderPage(ui, state, tail, actions);
    const layout = timeline ? timelineLayout(timeline.data, timeline.data.now + (Date.now() / 1000 - timeline.at)) : null;
    renderTimeline({ rows: $('tl-rows'), span: $('tl-span'), empty: $('tl-empty') }, layout, ui.selected, select);
  });
}

// ---- wiring ----

/** The form's text fields, by id. */
const field = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ ($(id));

function start() {
  // A token still in the address bar was refused (a right one is traded for the cookie and dropped).
  const refused = new URLSearchParams(location.search).has('token');
  const hash = new URLSearchParams(location.hash.slice(1));
  const sid = hash.get('session');
  if (sid) {
    const key = hash.get('key');
    const known = ui.sessions.find((s) => s.session_id === sid);
    if (known) known.session_key = key ?? known.session_key;
    else ui.sessions.push({ session_id: sid, session_key: key, title: hash.get('title') ?? '' });
    saveSessions();
  }
  // The token and the key leave the address bar (and the history).
  if (refused || sid) history.replaceState(null, '', location.pathname);
  $('tl-legend').replaceChildren(...legend());
  $('login').addEventListener('submit', (e) => {
    e.preventDefault();
    const token = field('login-token').value.trim();
    // The server trades a right token for its cookie and sends the page back without it.
    if (token) location.assign(`/ui/?token=${encodeURIComponent(token)}${sid ? `#session=${encodeURIComponent(sid)}` : ''}`);
  });
  auth.onUnauthorized = () => askToken(LOGIN_WHY.expired);
  $('create').addEventListener('submit', (e) => {
    e.preventDefault();
    void createSession(field('title').value.trim());
    field('title').value = '';
  });
  $('open').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = field('open-id').value.trim();
    if (id) void openById(id, field('open-key').value.trim());
  });
  $('spawn').addEventListener('submit', (e) => {
    e.preventDefault();
    void spawnFromForm();
  });
  $('spawn-agent').addEventListener('change', () => {
    $('spawn-steps').hidden = field('spawn-agent').value !== 'scripted';
  });
  // Selection on press, not click: the row is the same element however often the roster redraws.
  const pick = (/** @type {Event} */ e) => {
    const tr = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (e.target).closest('tr[data-subagent-id]'));
    if (tr?.dataset.subagentId) select(tr.dataset.subagentId);
  };
  $('roster').addEventListener('pointerdown', pick);
  $('roster').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') pick(e);
  });
  $('steer').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = field('steer-text');
    if (ui.selected) void steer(ui.selected, input.value);
    input.value = '';
  });
  // Elapsed times and the Timeline move, a live child's tail may grow between events (a tool's
  // result line), and another host's steers show only in the timeline route: each second.
  setInterval(() => {
    if (liveCount(state) > 0) {
      schedule();
      pullTimeline();
    }
    if (tail && ui.selected && state.children[ui.selected] && !isFinal(state.children[ui.selected].status)) void pullTail();
  }, 1000);
  void refreshSingleUser().then((allowed) => {
    if (!allowed) return askToken(refused ? LOGIN_WHY.wrong : LOGIN_WHY.missing);
    openSession(sid ?? ui.sessions[0]?.session_id ?? null);
  });
  schedule();
}

start();
