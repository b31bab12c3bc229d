// @ts-check
// The dashboard's state: one pure fold of what the server says, in seq order. No DOM, no fetch,
// no clock: app.js feeds it the stream's snapshot (or reset), its events, the entries it fetched
// and the answers to its own steers, and renders whatever comes out. The same module is served to
// the browser as it is and unit-tested in Node (test/http/dashboard-state.test.ts).
//
// The rules that make a resumed stream fold to the same state as an unbroken one:
// - an event whose seq is not above the state's seq is a duplicate and changes nothing;
// - a snapshot is the roster at its seq: it replaces the roster (an older one is ignored), and
//   keeps what only events and entries carry (a finished child's summary, missed_steer);
// - a steer's fate only moves forward: sending -> queued -> delivered | missed, or rejected;
//   steers of other hosts come from deliveries, completion entries' missed_steer_detail and the
//   timeline route (the one place a queued steer of another host shows).
import { timelineSteers } from './timeline.js';

/** Statuses after which a child never changes again. */
export const FINAL_STATUSES = Object.freeze(['completed', 'interrupted', 'failed', 'error', 'timeout']);

/** Finished children kept per session, as the server's default retention (--retain-finished). */
export const RETAIN_FINISHED = 100;

/** Events kept for the page's event log. */
export const LOG_EVENTS = 200;

/** Steers kept (the oldest settled ones go first). */
export const MAX_STEERS = 200;

/**
 * @typedef {'queued' | 'running' | 'completed' | 'interrupted' | 'failed' | 'error' | 'timeout'} ChildStatus
 * @typedef {{
 *   subagent_id: string, parent_id: string | null, depth: number, goal: string,
 *   delegation_id: string, model: string, started_at: number | null, finished_at: number | null,
 *   status: ChildStatus, tool_count: number, last_tool: string, accepting_steer: boolean,
 *   summary?: string, error?: string, missed_steer?: string, exit_reason?: string,
 *   duration_seconds?: number,
 * }} Child
 * @typedef {'sending' | 'queued' | 'delivered' | 'missed' | 'rejected'} SteerFate
 * @typedef {{
 *   key: string, steer_id: string | null, subagent_id: string, text: string, fate: SteerFate,
 *   reason?: string, mine: boolean,
 * }} Steer
 * @typedef {{ seq: number, type: string, subagent_id: string | null, text: string }} LogLine
 * @typedef {{
 *   seq: number, synced: boolean, children: Readonly<Record<string, Child>>,
 *   finished: readonly string[], steers: readonly Steer[], idle: boolean, resets: number,
 *   gaps: number, log: readonly LogLine[],
 * }} State
 * @typedef {{ type: string, seq: number, ts: number, session_id?: string | null, payload: Record<string, unknown> }} WireEvent
 * @typedef {{ seq: number, subagents: ReadonlyArray<Record<string, unknown>> }} SnapshotData
 * @typedef {(
 *   | { kind: 'snapshot', data: SnapshotData, reset?: boolean }
 *   | { kind: 'event', event: WireEvent }
 *   | { kind: 'entries', results: ReadonlyArray<Record<string, unknown>> }
 *   | { kind: 'steer.sent', key: string, subagent_id: string, text: string }
 *   | { kind: 'steer.answer', key: string, status: 'queued' | 'rejected', steer_id?: string, text?: string, reason?: string }
 *   | { kind: 'timeline', data: import('./timeline.js').TimelineData }
 * )} Input
 */

/** @returns {State} */
export function initialState() {
  return { seq: 0, synced: false, children: {}, finished: [], steers: [], idle: false, resets: 0, gaps: 0, log: [] };
}

/** @param {string} status */
export function isFinal(status) {
  return FINAL_STATUSES.includes(status);
}

/**
 * The one fold. Never throws on a malformed input from the wire: it is ignored.
 * @param {State} state
 * @param {Input} input
 * @returns {State}
 */
export function fold(state, input) {
  switch (input.kind) {
    case 'snapshot':
      return foldSnapshot(state, input.data, input.reset === true);
    case 'event':
      return foldEvent(state, input.event);
    case 'entries':
      return foldEntries(state, input.results);
    case 'steer.sent':
      return foldSteerSent(state, input);
    case 'steer.answer':
      return foldSteerAnswer(state, input);
    case 'timeline':
      return timelineSteers(input.data).reduce((st, t) => upsertSteer(st, t.steer_id, t.subagent_id, t.fate, ''), state);
    default:
      return state;
  }
}

/**
 * @param {State} state
 * @param {readonly Input[]} inputs
 */
export function foldAll(state, inputs) {
  return inputs.reduce(fold, state);
}

// ---- snapshot and reset ----

/**
 * @param {State} state
 * @param {SnapshotData} data
 * @param {boolean} reset
 * @returns {State}
 */
function foldSnapshot(state, data, reset) {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the server's JSON, typed here but not checked on arrival
  if (!data || typeof data.seq !== 'number' || !Array.isArray(data.subagents)) return state;
  if (state.synced && data.seq < state.seq) return state;
  /** @type {Record<string, Child>} */
  const children = {};
  /** @type {string[]} */
  const finishedNow = [];
  for (const raw of data.subagents) {
    // eslint-disable-next-line @typescript-eslint/no-unsafe-argument -- an item of the server's JSON list, checked by the callee
    const fresh = childFromSnapshot(raw);
    if (!fresh) continue;
    const known = state.children[fresh.subagent_id];
    // What the snapshot cannot say (entry fields) survives from what this page already knew.
    const merged = known && isFinal(fresh.status) ? { ...entryFieldsOf(known), ...fresh } : fresh;
    children[fresh.subagent_id] = merged;
    if (isFinal(merged.status)) finishedNow.push(merged.subagent_id);
  }
  // Finished order: the order this page saw them finish, then the rest by finished_at.
  const seen = state.finished.filter((id) => children[id] && isFinal(children[id].status));
  const rest = finishedNow
    .filter((id) => !seen.includes(id))
    .sort((a, b) => (children[a]?.finished_at ?? 0) - (children[b]?.finished_at ?? 0) || (a < b ? -1 : a > b ? 1 : 0));
  const ids = Object.keys(children);
  const live = ids.some((id) => !isFinal(/** @type {Child} */ (children[id]).status));
  let steers = state.steers;
  // A steer still queued for a child the snapshot shows finished was never delivered before the
  // end (a delivery would have come first, in seq order): it missed.
  steers = steers.map((s) => {
    const c = children[s.subagent_id];
    return s.fate === 'queued' && c && isFinal(c.status) ? { ...s, fate: /** @type {SteerFate} */ ('missed') } : s;
  });
  return {
    ...state,
    seq: data.seq,
    synced: true,
    children,
    finished: [...seen, ...rest],
    steers,
    idle: ids.length > 0 && !live,
    resets: state.resets + (reset ? 1 : 0),
  };
}

/**
 * A snapshot row (or one with entry fields, nested or flat) as a Child; null if it is not one.
 * @param {Record<string, unknown>} raw
 * @returns {Child | null}
 */
function childFromSnapshot(raw) {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the server's JSON, typed here but not checked on arrival
  if (!raw || typeof raw.subagent_id !== 'string') return null;
  const status = /** @type {ChildStatus} */ (typeof raw.status === 'string' ? raw.status : 'queued');
  /** @type {Child} */
  const child = {
    subagent_id: raw.subagent_id,
    parent_id: typeof raw.parent_id === 'string' ? raw.parent_id : null,
    depth: num(raw.depth, 0),
    goal: str(raw.goal),
    delegation_id: str(raw.delegation_id),
    model: str(raw.model),
    started_at: typeof raw.started_at === 'number' ? raw.started_at : null,
    finished_at: typeof raw.finished_at === 'number' ? raw.finished_at : null,
    status,
    tool_count: num(raw.tool_count, 0),
    last_tool: str(raw.last_tool),
    accepting_steer: raw.accepting_steer === true && !isFinal(status),
  };
  return isFinal(status) ? { ...child, ...entryFieldsFrom(entryOf(raw)) } : child;
}

// ---- events ----

/**
 * @param {State} state
 * @param {WireEvent} event
 * @returns {State}
 */
function foldEvent(state, event) {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the server's JSON, typed here but not checked on arrival
  if (!event || typeof event.seq !== 'number' || typeof event.type !== 'string') return state;
  if (event.seq <= state.seq) return state; // a duplicate: already folded, or older than the snapshot
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the server's JSON, typed here but not checked on arrival
  const payload = event.payload && typeof event.payload === 'object' ? event.payload : {};
  const gap = state.synced && event.seq !== state.seq + 1 ? 1 : 0;
  let next = { ...state, seq: event.seq, synced: true, gaps: state.gaps + gap, log: appendLog(state.log, event, payload) };
  const id = typeof payload.subagent_id === 'string' ? payload.subagent_id : null;
  switch (event.type) {
    case 'subagent.spawn_requested':
    case 'subagent.start':
    case 'subagent.thinking':
    case 'subagent.text':
    case 'subagent.tool':
    case 'subagent.steer.delivered': {
      if (id === null) return next;
      const known = next.children[id];
      // A finished child changes no more (a delivery always comes before its completion).
      if (known && isFinal(known.status)) return event.type === 'subagent.steer.delivered' ? withSteerDelivered(next, event, payload, id) : next;
      let child = known ?? childFromIdentity(payload);
      if (child.model === '' && typeof payload.model === 'string') child = { ...child, model: payload.model };
      if (event.type !== 'subagent.spawn_requested' && child.status === 'queued') {
        child = { ...child, status: 'running', started_at: child.started_at ?? event.ts };
      }
      if (event.type === 'subagent.tool') {
        child = { ...child, tool_count: Math.max(child.tool_count, num(payload.tool_count, child.tool_count + 1)), last_tool: str(payload.tool_name) };
      }
      next = { ...next, children: { ...next.children, [id]: child }, idle: false };
      return event.type === 'subagent.steer.delivered' ? withSteerDelivered(next, event, payload, id) : next;
    }
    case 'subagent.complete':
      return id === null ? next : completeChild(next, event, payload, id);
    case 'session.idle':
      return { ...next, idle: true };
    default:
      return next;
  }
}

/**
 * @param {State} state
 * @param {WireEvent} _event
 * @param {Record<string, unknown>} payload
 * @param {string} id
 * @returns {State}
 */
function withSteerDelivered(state, _event, payload, id) {
  const steer_id = typeof payload.steer_id === 'string' ? payload.steer_id : null;
  if (steer_id === null) return state;
  // Delivered before this page heard its own answer, or a steer another host sent: upsert adds it.
  return upsertSteer(state, steer_id, id, 'delivered', str(payload.text));
}

/** How far along each fate is: a steer's fate only moves to a higher rank. */
const FATE_RANK = Object.freeze({ sending: 0, queued: 1, delivered: 2, missed: 2, rejected: 2 });

/**
 * A steer the server tells of (by id): its fate moved forward, its text filled in if this page
 * did not have it; added (as another host's) if the page did not know it.
 * @param {State} state
 * @param {string} steer_id
 * @param {string} subagent_id
 * @param {'queued' | 'delivered' | 'missed'} fate
 * @param {string} text
 * @returns {State}
 */
function upsertSteer(state, steer_id, subagent_id, fate, text) {
  const i = state.steers.findIndex((s) => s.steer_id === steer_id);
  if (i < 0) return { ...state, steers: boundSteers([...state.steers, { key: steer_id, steer_id, subagent_id, text, fate, mine: false }]) };
  const known = /** @type {Steer} */ (state.steers[i]);
  const forward = FATE_RANK[fate] > FATE_RANK[known.fate];
  if (!forward && (known.text !== '' || text === '')) return state;
  return { ...state, steers: replaceAt(state.steers, i, { ...known, fate: forward ? fate : known.fate, text: known.text === '' ? text : known.text }) };
}

/**
 * The steers an entry names as missed (its missed_steer_detail), each marked missed with its text.
 * @param {State} state
 * @param {Record<string, unknown>} entry
 * @param {string} id
 * @returns {State}
 */
function withMissedDetail(state, entry, id) {
  /** @type {unknown} */
  const detail = entry.missed_steer_detail;
  if (!Array.isArray(detail)) return state;
  let next = state;
  for (const d of /** @type {unknown[]} */ (detail)) {
    const m = /** @type {Record<string, unknown> | null} */ (d && typeof d === 'object' ? d : null);
    if (m && typeof m.steer_id === 'string') next = upsertSteer(next, m.steer_id, id, 'missed', str(m.text));
  }
  return next;
}

/**
 * @param {State} state
 * @param {WireEvent} event
 * @param {Record<string, unknown>} payload
 * @param {string} id
 * @returns {State}
 */
function completeChild(state, event, payload, id) {
  const entry = entryOf(payload);
  const known = state.children[id] ?? childFromIdentity(payload);
  if (isFinal(known.status) && state.finished.includes(id)) return state;
  const status = /** @type {ChildStatus} */ (typeof entry.status === 'string' && isFinal(entry.status) ? entry.status : 'completed');
  /** @type {Child} */
  const child = {
    ...known,
    ...entryFieldsFrom(entry),
    status,
    accepting_steer: false,
    finished_at: known.finished_at ?? event.ts,
    started_at: known.started_at ?? event.ts,
  };
  const children = { ...state.children, [id]: child };
  // Every steer of this child still queued missed: a delivery comes before the completion.
  const steers = state.steers.map((s) => (s.subagent_id === id && s.fate === 'queued' ? { ...s, fate: /** @type {SteerFate} */ ('missed') } : s));
  let finished = [...state.finished.filter((f) => f !== id), id];
  // The server keeps the most recently finished; so does the page (rows that are never pruned
  // would grow without bound and disagree with any later snapshot).
  /** @type {Record<string, Child>} */
  let kept = children;
  if (finished.length > RETAIN_FINISHED) {
    const drop = finished.slice(0, finished.length - RETAIN_FINISHED);
    finished = finished.slice(drop.length);
    kept = { ...children };
    // eslint-disable-next-line @typescript-eslint/no-dynamic-delete -- children is a plain object keyed by subagent id, copied just above
    for (const d of drop) delete kept[d];
  }
  return withMissedDetail({ ...state, children: kept, finished, steers }, entry, id);
}

/**
 * A child first heard of from an event (its identity fields).
 * @param {Record<string, unknown>} p
 * @returns {Child}
 */
function childFromIdentity(p) {
  return {
    subagent_id: str(p.subagent_id),
    parent_id: typeof p.parent_id === 'string' ? p.parent_id : null,
    depth: num(p.depth, 0),
    goal: str(p.goal),
    delegation_id: str(p.delegation_id),
    model: str(p.model),
    started_at: null,
    finished_at: null,
    status: 'queued',
    tool_count: num(p.tool_count, 0),
    last_tool: '',
    accepting_steer: true,
  };
}

// ---- completion entries (flat, as hermes names them, or nested under `entry`) ----

/**
 * @param {Record<string, unknown>} p
 * @returns {Record<string, unknown>}
 */
function entryOf(p) {
  const nested = p.entry;
  return nested && typeof nested === 'object' ? /** @type {Record<string, unknown>} */ (nested) : p;
}

/**
 * @param {Record<string, unknown>} e
 * @returns {Partial<Child>}
 */
function entryFieldsFrom(e) {
  /** @type {Partial<Child>} */
  const out = {};
  if (typeof e.summary === 'string') out.summary = e.summary;
  if (typeof e.error === 'string') out.error = e.error;
  if (typeof e.missed_steer === 'string') out.missed_steer = e.missed_steer;
  if (typeof e.exit_reason === 'string') out.exit_reason = e.exit_reason;
  if (typeof e.duration_seconds === 'number') out.duration_seconds = e.duration_seconds;
  return out;
}

/**
 * @param {Child} c
 * @returns {Partial<Child>}
 */
function entryFieldsOf(c) {
  return entryFieldsFrom(/** @type {Record<string, unknown>} */ (/** @type {unknown} */ (c)));
}

/**
 * Entries fetched from a delegation (after a snapshot showed finished children without them).
 * Facts that never change, so they fold in whenever they arrive.
 * @param {State} state
 * @param {ReadonlyArray<Record<string, unknown>>} results
 * @returns {State}
 */
function foldEntries(state, results) {
  if (!Array.isArray(results)) return state;
  let children = state.children;
  /** @type {Array<[Record<string, unknown>, string]>} */
  const missed = [];
  for (const raw of results) {
    // eslint-disable-next-line @typescript-eslint/no-unsafe-argument -- an item of the server's JSON list, checked by the callee
    const entry = raw ? entryOf(raw) : null;
    const id = entry && typeof entry.subagent_id === 'string' ? entry.subagent_id : null;
    const known = id === null ? undefined : children[id];
    if (entry === null || id === null || !known || !isFinal(known.status)) continue;
    children = { ...children, [id]: { ...known, ...entryFieldsFrom(entry) } };
    missed.push([entry, id]);
  }
  const next = children === state.children ? state : { ...state, children };
  return missed.reduce((st, [entry, id]) => withMissedDetail(st, entry, id), next);
}

// ---- this page's steers ----

/**
 * @param {State} state
 * @param {{ key: string, subagent_id: string, text: string }} input
 * @returns {State}
 */
function foldSteerSent(state, input) {
  if (state.steers.some((s) => s.key === input.key)) return state;
  return { ...state, steers: boundSteers([...state.steers, { key: input.key, steer_id: null, subagent_id: input.subagent_id, text: input.text, fate: 'sending', mine: true }]) };
}

/**
 * @param {State} state
 * @param {{ key: string, status: 'queued' | 'rejected', steer_id?: string, text?: string, reason?: string }} input
 * @returns {State}
 */
function foldSteerAnswer(state, input) {
  const i = state.steers.findIndex((s) => s.key === input.key);
  if (i < 0) return state;
  const mine = /** @type {Steer} */ (state.steers[i]);
  if (mine.fate !== 'sending') return state;
  if (input.status !== 'queued' || typeof input.steer_id !== 'string') {
    return { ...state, steers: replaceAt(state.steers, i, { ...mine, fate: 'rejected', ...(input.reason ? { reason: input.reason } : {}) }) };
  }
  const steer_id = input.steer_id;
  const text = typeof input.text === 'string' ? input.text : mine.text;
  // Its delivery may have come over the stream before this answer: that row is this steer.
  const j = state.steers.findIndex((s) => s.steer_id === steer_id);
  if (j >= 0) {
    const delivered = /** @type {Steer} */ (state.steers[j]);
    const merged = { ...mine, steer_id, text, fate: delivered.fate };
    return { ...state, steers: state.steers.filter((_, k) => k !== j).map((s) => (s.key === mine.key ? merged : s)) };
  }
  const child = state.children[mine.subagent_id];
  // Already finished in the folded stream and never delivered: it missed.
  const fate = child && isFinal(child.status) ? 'missed' : 'queued';
  return { ...state, steers: replaceAt(state.steers, i, { ...mine, steer_id, text, fate }) };
}

/**
 * @param {readonly Steer[]} steers
 * @returns {readonly Steer[]}
 */
function boundSteers(steers) {
  if (steers.length <= MAX_STEERS) return steers;
  const out = [...steers];
  while (out.length > MAX_STEERS) {
    const settled = out.findIndex((s) => s.fate !== 'sending' && s.fate !== 'queued');
    out.splice(settled >= 0 ? settled : 0, 1);
  }
  return out;
}

// ---- views (pure too: app.js renders them) ----

/**
 * The roster as a tree: depth-first, siblings by start time. A child whose parent is not in the
 * roster (pruned, or of another page's delegation) is shown at the top level.
 * @param {State} state
 * @returns {Child[]}
 */
export function rosterTree(state) {
  const all = Object.values(state.children);
  /** @type {Map<string | null, Child[]>} */
  const byParent = new Map();
  for (const c of all) {
    const parent = c.parent_id !== null && state.children[c.parent_id] ? c.parent_id : null;
    const list = byParent.get(parent) ?? [];
    list.push(c);
    byParent.set(parent, list);
  }
  /** @param {Child} a @param {Child} b */
  const order = (a, b) => (a.started_at ?? Infinity) - (b.started_at ?? Infinity) || (a.subagent_id < b.subagent_id ? -1 : a.subagent_id > b.subagent_id ? 1 : 0);
  /** @type {Child[]} */
  const out = [];
  /** @param {string | null} parent */
  const visit = (parent) => {
    for (const c of [...(byParent.get(parent) ?? [])].sort(order)) {
      out.push(c);
      visit(c.subagent_id);
    }
  };
  visit(null);
  return out;
}

/**
 * The child and every descendant in the roster (what an interrupt of it stops).
 * @param {State} state
 * @param {string} id
 * @returns {string[]}
 */
export function subtree(state, id) {
  const out = state.children[id] ? [id] : [];
  for (let i = 0; i < out.length; i++) {
    for (const c of Object.values(state.children)) if (c.parent_id === out[i] && !out.includes(c.subagent_id)) out.push(c.subagent_id);
  }
  return out;
}

/**
 * @param {State} state
 * @param {string} id
 */
export function queuedSteers(state, id) {
  return state.steers.filter((s) => s.subagent_id === id && (s.fate === 'queued' || s.fate === 'sending')).length;
}

/**
 * Seconds the child has run (until it finished, or until `now`, unix seconds).
 * @param {Child} c
 * @param {number} now
 */
export function elapsedSeconds(c, now) {
  if (c.started_at === null) return 0;
  if (typeof c.duration_seconds === 'number') return c.duration_seconds;
  return Math.max(0, (c.finished_at ?? now) - c.started_at);
}

/** @param {State} state */
export function liveCount(state) {
  return Object.values(state.children).filter((c) => !isFinal(c.status)).length;
}

// ---- the selected child's tail: the tail route's window, extended by offset ----

/** Characters of tail the page keeps (it trims the front at a line). */
export const TAIL_KEEP_CHARS = 256 * 1024;

/**
 * @typedef {{ subagent_id: string, text: string, offset: number, seq: number, loaded: boolean, skipped: number }} Tail
 * @typedef {{ subagent_id?: unknown, available?: unknown, text?: unknown, offset?: unknown, truncated?: unknown, seq?: unknown }} TailAnswer
 */

/**
 * @param {string} subagent_id
 * @returns {Tail}
 */
export function tailInit(subagent_id) {
  return { subagent_id, text: '', offset: 0, seq: 0, loaded: false, skipped: 0 };
}

/**
 * Folds the answer to `GET .../tail?since=<since>` (since undefined: the first, whole window).
 * An answer to a `since` other than the tail's offset is stale (another fetch got there first) and
 * ignored, so no byte is shown twice; `truncated` marks where bytes left the window unseen.
 * @param {Tail} tail
 * @param {number | undefined} since
 * @param {TailAnswer} answer
 * @returns {Tail}
 */
export function tailApply(tail, since, answer) {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the server's JSON, typed here but not checked on arrival
  if (!answer || answer.subagent_id !== tail.subagent_id || answer.available === false) return tail;
  const text = typeof answer.text === 'string' ? answer.text : '';
  const offset = typeof answer.offset === 'number' ? answer.offset : tail.offset;
  const seq = typeof answer.seq === 'number' ? Math.max(answer.seq, tail.seq) : tail.seq;
  if (since === undefined) {
    if (tail.loaded) return tail;
    return { ...tail, text: trimTail(text), offset, seq, loaded: true, skipped: answer.truncated === true ? 1 : 0 };
  }
  if (!tail.loaded || since !== tail.offset || offset < tail.offset) return tail;
  const marker = answer.truncated === true ? '\n[… earlier output left the window …]\n' : '';
  return { ...tail, text: trimTail(tail.text + marker + text), offset, seq, skipped: tail.skipped + (marker ? 1 : 0) };
}

/**
 * Whether an event may have written to the tail's child after the tail's window was taken.
 * @param {Tail} tail
 * @param {WireEvent} event
 */
export function tailStale(tail, event) {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the server's JSON, typed here but not checked on arrival
  return tail.loaded && event.seq > tail.seq && event.payload?.subagent_id === tail.subagent_id;
}

/** @param {string} text */
function trimTail(text) {
  if (text.length <= TAIL_KEEP_CHARS) return text;
  const cut = text.length - TAIL_KEEP_CHARS;
  const nl = text.indexOf('\n', cut);
  return text.slice(nl >= 0 ? nl + 1 : cut);
}

// ---- small helpers ----

/**
 * @param {readonly LogLine[]} log
 * @param {WireEvent} event
 * @param {Record<string, unknown>} payload
 * @returns {readonly LogLine[]}
 */
function appendLog(log, event, payload) {
  const line = {
    seq: event.seq,
    type: event.type,
    subagent_id: typeof payload.subagent_id === 'string' ? payload.subagent_id : null,
    text: typeof payload.text === 'string' ? payload.text : typeof payload.tool_name === 'string' ? payload.tool_name : typeof payload.status === 'string' ? payload.status : '',
  };
  const out = log.length >= LOG_EVENTS ? log.slice(log.length - LOG_EVENTS + 1) : [...log];
  out.push(line);
  return out;
}

/**
 * @template T
 * @param {readonly T[]} list
 * @param {number} i
 * @param {T} value
 * @returns {T[]}
 */
function replaceAt(list, i, value) {
  const out = [...list];
  out[i] = value;
  return out;
}

/** @param {unknown} v */
function str(v) {
  return typeof v === 'string' ? v : '';
}

/**
 * @param {unknown} v
 * @param {number} fallback
 */
function num(v, fallback) {
  return typeof v === 'number' && Number.isFinite(v) ? v : fallback;
}
