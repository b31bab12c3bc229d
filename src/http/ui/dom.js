// The dashboard's small DOM helpers: make an element, redraw a box only when what it shows
// changed, keep keyed children's elements between renders (a row under the pointer stays the same
// element, so a click whose press and release land on different renders is not lost).

/**
 * An HTML element: attributes (`on…` ones are listeners), then children.
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node | string | null | false | undefined)} kids
 */
export function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids) if (kid !== null && kid !== false && kid !== undefined) el.append(kid);
  return el;
}

/**
 * Redraws `el`'s content only when `sig` changed: a row or button under the pointer stays the same
 * element between renders (a click whose press and release land on different elements is lost).
 * @param {HTMLElement} el
 * @param {string} sig
 * @param {() => Array<Node | string>} build
 */
export function patch(el, sig, build) {
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
export function keyed(container, items, key, sig, build) {
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
export function indent(el, depth) {
  el.style.paddingLeft = `${0.5 + depth * 1.4}rem`;
  return el;
}


const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * An SVG element with its attributes (presentation attributes, never a style: the CSP allows none).
 * @param {string} tag
 * @param {Record<string, string | number | null | undefined>} [attrs]
 * @param {...(Node | string | null | undefined)} kids
 */
export function svg(tag, attrs = {}, ...kids) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  for (const kid of kids) if (kid !== null && kid !== undefined) el.append(kid);
  return el;
}

/**
 * Sets (or, for null and undefined, removes) attributes, touching only those that changed.
 * @param {Element} el
 * @param {Record<string, string | number | null | undefined>} attrs
 */
export function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) {
      if (el.hasAttribute(k)) el.removeAttribute(k);
    } else if (el.getAttribute(k) !== String(v)) el.setAttribute(k, String(v));
  }
}
