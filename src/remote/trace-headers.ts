// W3C trace context in NATS headers, both ways: the control plane's assignment carries the child's
// `invoke_agent` context, a worker's spawn request the span the spawn was made in. Only the three
// W3C keys travel; their values are the propagator's to judge (anything invalid parents nothing).
import { headers, type MsgHdrs } from '@nats-io/transport-node';

const KEYS = ['traceparent', 'tracestate', 'baggage'] as const;
/** Longer than any trace context a propagator writes: ignored, like any other invalid one. */
const MAX_VALUE = 8192;

/** NATS headers holding `carrier`'s trace context; undefined when it holds none (no header block sent). */
export function traceHeaders(carrier: Readonly<Record<string, string>>): MsgHdrs | undefined {
  let h: MsgHdrs | undefined;
  for (const key of KEYS) {
    const v = carrier[key];
    if (v === undefined || v === '') continue;
    (h ??= headers()).set(key, v);
  }
  return h;
}

/** The trace context a message's headers carry, as a carrier (empty when none). */
export function traceCarrier(h: MsgHdrs | undefined): Record<string, string> {
  const carrier: Record<string, string> = {};
  if (!h) return carrier;
  for (const key of KEYS) {
    const v = h.get(key);
    if (v !== '' && v.length <= MAX_VALUE) carrier[key] = v;
  }
  return carrier;
}
