// @ts-check
// The Timeline's geometry: the answer of GET /v1/sessions/{sid}/timeline laid out as rows, one per
// child in the server's tree order, every position a percentage of the time axis. Pure (no DOM,
// no clock: `now` comes in), so Node tests it as it is; timeline-view.js draws what comes out.

/** The four fates of a steer, in the legend's order. */
export const TIMELINE_FATES = Object.freeze(['queued', 'delivered', 'missed', 'rejected']);

/**
 * @typedef {{ subagent_id: string, parent_id: string | null, depth: number, goal: string, status: string,
 *   created_at: number, started_at: number | null, finished_at: number | null }} TimelineChild
 * @typedef {{ steer_id: string | null, subagent_id: string, fate: string, queued_at: number | null, at: number | null }} TimelineSteer
 * @typedef {{ subagent_id: string, target_id: string, at: number }} TimelineInterrupt
 * @typedef {{ session_id: string, now: number, children: TimelineChild[], steers: TimelineSteer[], interrupts: TimelineInterrupt[] }} TimelineData
 * @typedef {{ x: number, w: number }} Span
 * @typedef {{ fate: string, steer_id: string | null, x: number, t: number }} SteerMark
 * @typedef {{ target_id: string, x: number, t: number }} InterruptMark
 * @typedef {{ child: TimelineChild, queued: Span | null, run: Span | null, end: number, steers: SteerMark[], interrupts: InterruptMark[] }} Row
 * @typedef {{ start: number, end: number, live: boolean, rows: Row[] }} Layout
 */

/** @param {string} status */
const finished = (status) => status !== 'queued' && status !== 'running';

/**
 * Whether a value is a timeline answer this page can draw (the server's JSON, checked on arrival).
 * @param {unknown} v
 * @returns {v is TimelineData}
 */
export function isTimeline(v) {
  if (typeof v !== 'object' || v === null) return false;
  const o = /** @type {Record<string, unknown>} */ (v);
  return typeof o.session_id === 'string' && typeof o.now === 'number' && Array.isArray(o.children) && Array.isArray(o.steers) && Array.isArray(o.interrupts);
}

/**
 * The rows at `now` (unix seconds). The axis runs from the first child's creation to now while a
 * child runs; once the tree is quiet, to its last moment, so a finished run stays readable.
 * @param {TimelineData} data
 * @param {number} now
 * @returns {Layout}
 */
export function timelineLayout(data, now) {
  const kids = data.children;
  const live = kids.some((c) => !finished(c.status));
  const start = kids.reduce((m, c) => Math.min(m, c.created_at), Infinity);
  if (!Number.isFinite(start)) return { start: now, end: now, live: false, rows: [] };
  let last = start;
  for (const c of kids) last = Math.max(last, c.finished_at ?? c.started_at ?? c.created_at);
  for (const s of data.steers) last = Math.max(last, s.at ?? s.queued_at ?? start);
  for (const i of data.interrupts) last = Math.max(last, i.at);
  const end = live ? Math.max(now, last) : last;
  // A zero-length axis (everything in one millisecond) still draws: one second wide.
  const span = end - start > 0 ? end - start : 1;
  const pct = (/** @type {number} */ t) => Math.min(100, Math.max(0, ((t - start) / span) * 100));
  const rows = kids.map((child) => {
    const stop = child.finished_at ?? end;
    const queuedTo = child.started_at ?? stop;
    const queued = queuedTo > child.created_at ? { x: pct(child.created_at), w: pct(queuedTo) - pct(child.created_at) } : null;
    const run = child.started_at === null ? null : { x: pct(child.started_at), w: Math.max(0, pct(stop) - pct(child.started_at)) };
    const steers = data.steers
      .filter((s) => s.subagent_id === child.subagent_id)
      .map((s) => {
        // A missed steer is drawn at the child's end; a queued one where it waits; the rest where they settled.
        const t = s.fate === 'missed' ? (child.finished_at ?? s.at ?? stop) : s.fate === 'queued' ? (s.queued_at ?? stop) : (s.at ?? s.queued_at ?? stop);
        return { fate: s.fate, steer_id: s.steer_id, x: pct(t), t };
      });
    const interrupts = data.interrupts.filter((i) => i.subagent_id === child.subagent_id).map((i) => ({ target_id: i.target_id, x: pct(i.at), t: i.at }));
    return { child, queued, run, end: stop, steers, interrupts };
  });
  return { start, end, live, rows };
}

/**
 * The steers of a timeline as the fold takes them (state.js merges them into its steer list).
 * Refused steers carry no id and are left to the Timeline: they cannot be told apart.
 * @param {TimelineData} data
 * @returns {Array<{ steer_id: string, subagent_id: string, fate: 'queued' | 'delivered' | 'missed' }>}
 */
export function timelineSteers(data) {
  /** @type {Array<{ steer_id: string, subagent_id: string, fate: 'queued' | 'delivered' | 'missed' }>} */
  const out = [];
  for (const s of data.steers) {
    if (s.steer_id !== null && (s.fate === 'queued' || s.fate === 'delivered' || s.fate === 'missed')) out.push({ steer_id: s.steer_id, subagent_id: s.subagent_id, fate: s.fate });
  }
  return out;
}

/**
 * Seconds as the axis labels them.
 * @param {number} s
 */
export function fmtSpan(s) {
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} m ${Math.round(s % 60)} s`;
}
