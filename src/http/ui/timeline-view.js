// The Timeline (a Gantt) of the open session: a row per child in tree order, indented by depth;
// a bar from its start (a lighter queued part from its creation) to its end or now, coloured by
// status; steer markers at their fate's moment, one shape and colour per fate; interrupt marks.
// Every position is a percentage of the axis (timeline.js), so the drawing fits any width. Rows,
// bars and markers keep their elements between redraws (a tooltip under the pointer stays).
// Hooks: data-subagent-id + data-status on each bar, data-fate + data-subagent-id (+ data-steer-id)
// on each steer marker, data-interrupt + data-subagent-id on each interrupt mark.
import { h, indent, setAttrs, svg } from './dom.js';
import { fmtSpan, TIMELINE_FATES } from './timeline.js';

/** Each fate's shape, centred on (0, 0). */
const SHAPES = Object.freeze({
  queued: 'M-4.5,0a4.5,4.5 0 1,0 9,0a4.5,4.5 0 1,0 -9,0',
  delivered: 'M-4.5,0a4.5,4.5 0 1,0 9,0a4.5,4.5 0 1,0 -9,0',
  missed: 'M-4,-4h8v8h-8z',
  rejected: 'M0,-5.5L5.5,4.5H-5.5Z',
});
const INTERRUPT = 'M0,-8V8M-3.5,-3.5L3.5,3.5M3.5,-3.5L-3.5,3.5';
const ROW_H = 20;
const MID = ROW_H / 2;

/** @param {string} fate */
const shapeOf = (fate) => SHAPES[/** @type {keyof typeof SHAPES} */ (fate)] ?? SHAPES.rejected;

/** @param {number} t */
const clock = (t) => new Date(t * 1000).toLocaleTimeString();

/** The legend: the four fates, the interrupt mark and the bar's queued part. */
export function legend() {
  const item = (/** @type {string} */ name, /** @type {SVGElement} */ mark) =>
    h('li', { 'data-legend': name }, svg('svg', { class: 'tl-key', width: 14, height: 14, viewBox: '-7 -7 14 14', 'aria-hidden': 'true' }, mark), ` ${name}`);
  return [
    ...TIMELINE_FATES.map((f) => item(f, svg('path', { class: `tl-steer fate-${f}`, d: shapeOf(f) }))),
    item('interrupt', svg('path', { class: 'tl-interrupt', d: INTERRUPT })),
    item('waiting in the queue', svg('rect', { class: 'tl-queued', x: -6, y: -3, width: 12, height: 6 })),
  ];
}

/**
 * Keeps `parent`'s keyed children in the order of `keys`: reused by key, made by `make` when new.
 * @template {Element} E
 * @param {Element} parent
 * @param {readonly string[]} keys
 * @param {(key: string) => E} make
 * @returns {E[]}
 */
function reconcile(parent, keys, make) {
  /** @type {Map<string, E>} */
  const old = new Map();
  for (const el of [...parent.children]) old.set(el.getAttribute('data-key') ?? '', /** @type {E} */ (el));
  const els = keys.map((k) => {
    const el = old.get(k) ?? make(k);
    el.setAttribute('data-key', k);
    return el;
  });
  const same = els.length === parent.children.length && els.every((el, i) => parent.children[i] === el);
  if (!same) parent.replaceChildren(...els);
  return els;
}

/**
 * @param {SVGElement} el
 * @param {string} text
 */
function setTitle(el, text) {
  let t = el.querySelector(':scope > title');
  if (!t) el.append((t = svg('title')));
  if (t.textContent !== text) t.textContent = text;
}

/**
 * Draws `layout` into the Timeline's box.
 * @param {{ rows: HTMLElement, span: HTMLElement, empty: HTMLElement }} box
 * @param {import('./timeline.js').Layout | null} layout
 * @param {string | null} selected
 * @param {(subagent_id: string) => void} pick
 */
export function renderTimeline(box, layout, selected, pick) {
  const rows = layout?.rows ?? [];
  box.empty.hidden = rows.length > 0;
  box.span.textContent = layout && rows.length > 0 ? `${clock(layout.start)} → ${layout.live ? 'now' : clock(layout.end)} · ${fmtSpan(layout.end - layout.start)}` : '';
  const els = reconcile(box.rows, rows.map((r) => r.child.subagent_id), (id) => {
    const label = indent(h('button', { class: 'tl-label', type: 'button', onclick: () => pick(id) }), 0);
    const track = svg('svg', { class: 'tl-track', width: '100%', height: ROW_H, 'aria-hidden': 'false' });
    const bar = svg('g', { class: 'tl-bar' }, svg('rect', { class: 'tl-queued', y: MID - 4, height: 8 }), svg('rect', { class: 'tl-run', y: MID - 6, height: 12, rx: 2 }));
    track.append(bar, svg('g', { class: 'tl-marks' }));
    return h('div', { class: 'tl-row' }, label, track);
  });
  rows.forEach((row, i) => drawRow(/** @type {HTMLElement} */ (els[i]), row, row.child.subagent_id === selected));
}

/**
 * @param {HTMLElement} el
 * @param {import('./timeline.js').Row} row
 * @param {boolean} selected
 */
function drawRow(el, row, selected) {
  const c = row.child;
  el.classList.toggle('selected', selected);
  const label = /** @type {HTMLElement} */ (el.querySelector('.tl-label'));
  indent(label, c.depth);
  const text = `${c.depth > 0 ? '└ ' : ''}${c.goal}`;
  if (label.textContent !== text) label.textContent = text;
  label.title = `${c.goal} (${c.subagent_id})`;
  const bar = /** @type {SVGGElement} */ (el.querySelector('.tl-bar'));
  setAttrs(bar, { class: `tl-bar status-${c.status}`, 'data-subagent-id': c.subagent_id, 'data-status': c.status });
  const [queued, run] = /** @type {SVGRectElement[]} */ ([...bar.querySelectorAll('rect')]);
  const span = (/** @type {{ x: number, w: number } | null} */ s) => (s ? { x: `${s.x}%`, width: `${Math.max(s.w, 0.4)}%`, visibility: null } : { x: 0, width: 0, visibility: 'hidden' });
  setAttrs(/** @type {SVGRectElement} */ (queued), span(row.queued));
  setAttrs(/** @type {SVGRectElement} */ (run), span(row.run));
  const took = c.started_at === null ? 'not started' : `${fmtSpan((c.finished_at ?? row.end) - c.started_at)} running`;
  const waited = (c.started_at ?? row.end) - c.created_at;
  setTitle(bar, `${c.goal} · ${c.status} · ${took}${waited >= 0.05 ? ` · ${fmtSpan(waited)} queued` : ''} · ${c.subagent_id}`);

  const marks = /** @type {SVGGElement} */ (el.querySelector('.tl-marks'));
  const items = [
    ...row.steers.map((s, i) => ({ key: `s:${s.steer_id ?? `r${i}`}`, steer: s, stop: null })),
    ...row.interrupts.map((m, i) => ({ key: `i:${i}`, steer: null, stop: m })),
  ];
  const els = reconcile(marks, items.map((m) => m.key), () => svg('svg', { overflow: 'visible', y: MID }, svg('path')));
  items.forEach((m, i) => {
    const mark = /** @type {SVGSVGElement} */ (els[i]);
    const path = /** @type {SVGPathElement} */ (mark.querySelector('path'));
    if (m.steer) {
      const s = m.steer;
      setAttrs(mark, { x: `${s.x}%`, class: `tl-mark fate-${s.fate}`, 'data-fate': s.fate, 'data-subagent-id': c.subagent_id, 'data-steer-id': s.steer_id });
      setAttrs(path, { class: `tl-steer fate-${s.fate}`, d: shapeOf(s.fate) });
      setTitle(mark, `steer ${s.fate} at ${clock(s.t)}${s.steer_id ? ` · ${s.steer_id}` : ''}`);
    } else if (m.stop) {
      setAttrs(mark, { x: `${m.stop.x}%`, class: 'tl-mark', 'data-interrupt': '', 'data-subagent-id': c.subagent_id, 'data-target-id': m.stop.target_id });
      setAttrs(path, { class: 'tl-interrupt', d: INTERRUPT });
      setTitle(mark, `interrupted at ${clock(m.stop.t)}${m.stop.target_id === c.subagent_id ? '' : ` (with ${m.stop.target_id})`}`);
    }
  });
}
