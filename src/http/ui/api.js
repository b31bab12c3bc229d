// The dashboard's wire: JSON calls to /v1/ and one session's event stream. The browser carries the
// auth cookie (set by /ui/?token=…); the session key goes in X-Subrun-Session-Key, or in the query
// of the stream (an EventSource cannot set headers). Nothing here touches the DOM.

/** Every event type the stream may name (an EventSource only hears types it listens to). */
export const EVENT_TYPES = [
  'delegation.dispatched',
  'delegation.complete',
  'subagent.spawn_requested',
  'subagent.start',
  'subagent.thinking',
  'subagent.text',
  'subagent.tool',
  'subagent.steer.delivered',
  'subagent.complete',
  'message.start',
  'message.delta',
  'message.complete',
  'tool.start',
  'tool.complete',
  'session.steer.delivered',
  'session.idle',
];

/** Told of every 401: the browser's login is missing or no longer the server's (app.js asks for the token). */
export const auth = { onUnauthorized: () => {} };

/**
 * One call. Resolves with the status and the parsed body (null if none); rejects only when the
 * request never got an answer (network down).
 * @param {string} method
 * @param {string} path
 * @param {{ body?: unknown, key?: string | null, idempotency?: string }} [opts]
 * @returns {Promise<{ status: number, body: any }>}
 */
export async function call(method, path, opts = {}) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'application/json' };
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  if (opts.key) headers['X-Subrun-Session-Key'] = opts.key;
  if (opts.idempotency) headers['Idempotency-Key'] = opts.idempotency;
  const res = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    cache: 'no-store',
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  if (res.status === 401) auth.onUnauthorized();
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = { error: { code: res.status, message: text.slice(0, 200) } };
  }
  return { status: res.status, body };
}

/**
 * A call retried once with the same Idempotency-Key if it got no answer: the server runs it once.
 * @param {string} method
 * @param {string} path
 * @param {{ body?: unknown, key?: string | null }} opts
 */
export async function callOnce(method, path, opts) {
  const idempotency = crypto.randomUUID();
  try {
    return await call(method, path, { ...opts, idempotency });
  } catch {
    return call(method, path, { ...opts, idempotency });
  }
}

/** @param {string} sid */
export const sessionPath = (sid) => `/v1/sessions/${encodeURIComponent(sid)}`;

/** @param {string} sid @param {string} cid */
export const childPath = (sid, cid) => `${sessionPath(sid)}/subagents/${encodeURIComponent(cid)}`;

/**
 * @typedef {{
 *   onSnapshot(data: unknown, reset: boolean): void,
 *   onEvent(event: unknown): void,
 *   onState(state: 'connecting' | 'live' | 'reconnecting' | 'closed', detail: string): void,
 * }} StreamHandlers
 */

/**
 * Follows one session's events. The browser resumes a dropped stream on its own, sending
 * Last-Event-ID; if it gives up (the server refused the reconnection), this opens a new one from
 * `cursor()` (the seq the page has folded), so a drop never loses or repeats an event.
 * @param {string} sid
 * @param {string | null} key
 * @param {() => number | null} cursor
 * @param {StreamHandlers} on
 * @returns {{ close(): void, reopen(): void }}
 */
export function follow(sid, key, cursor, on) {
  /** @type {EventSource | null} */
  let es = null;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retry;
  let closed = false;
  let failures = 0;

  const open = () => {
    const q = new URLSearchParams();
    if (key) q.set('session_key', key);
    const at = cursor();
    if (at !== null) q.set('last_event_id', String(at));
    const source = new EventSource(`${sessionPath(sid)}/events?${q}`);
    es = source;
    on.onState('connecting', at === null ? 'opening' : `resuming after seq ${at}`);
    source.onopen = () => {
      failures = 0;
      on.onState('live', '');
    };
    source.onerror = () => {
      if (closed || es !== source) return;
      if (source.readyState === EventSource.CONNECTING) {
        on.onState('reconnecting', `the browser resumes after seq ${cursor() ?? 0}`);
        return;
      }
      // CLOSED: the browser will not retry (an error status). Try again from our cursor, slower each time.
      source.close();
      failures++;
      const delay = Math.min(30_000, 1000 * 2 ** Math.min(failures, 5));
      on.onState('closed', `retrying in ${Math.round(delay / 1000)} s`);
      retry = setTimeout(open, delay);
    };
    /** @param {string} type @param {(data: unknown) => void} fn */
    const listen = (type, fn) =>
      source.addEventListener(type, (/** @type {MessageEvent} */ m) => {
        if (es !== source) return;
        let data;
        try {
          data = JSON.parse(m.data);
        } catch {
          return;
        }
        fn(data);
      });
    listen('snapshot', (d) => on.onSnapshot(d, false));
    listen('reset', (d) => on.onSnapshot(d, true));
    for (const type of EVENT_TYPES) {
      // The same envelope as the WebSocket's: a JSON-RPC notification whose params is the event.
      listen(type, (d) => on.onEvent(d && d.method === 'event' && d.params ? d.params : d));
    }
  };

  open();
  return {
    close() {
      closed = true;
      clearTimeout(retry);
      es?.close();
    },
    reopen() {
      clearTimeout(retry);
      es?.close();
      open();
    },
  };
}
