// The JetStream store's wire (docs/durability.md, "On JetStream"): the state log, one message (or
// a run of parts) per group commit of the control plane's working copy, and the snapshots that let
// the log be cut. Both streams are written by the leader alone; every log append names the
// sequence it expects to follow, so a fenced leader's next write is refused by the server itself.
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { isRecord } from '../../wire.ts';

export const LOG_STREAM = 'SUBRUN_STATE_LOG';
export const LOG_SUBJECT = 'sr.state.log';
export const SNAP_STREAM = 'SUBRUN_STATE_SNAP';
export const SNAP_SUBJECT = 'sr.state.snap';
/** Two minutes: a part retried within it (after a lost ack) is stored once. */
export const DUPLICATE_WINDOW_NS = 120_000_000_000;
/** Well under NATS's default max_payload (1 MiB): a commit bigger than this goes as several parts. */
export const PART_BYTES = 512 * 1024;

/** One recorded write: a statement's name (statements.ts) and its arguments as JSON. */
export type EncodedOp = [string, ...unknown[]];

const H_BATCH = 'Sr-Batch';
const H_PART = 'Sr-Part';
const H_UPTO = 'Sr-Upto';

/** A write's arguments as JSON: the only binary one is a session key's digest. */
export function encodeArgs(args: readonly unknown[]): unknown[] {
  return args.map((a) => (Buffer.isBuffer(a) ? { $b: a.toString('base64') } : a));
}

export function decodeArgs(args: readonly unknown[]): unknown[] {
  return args.map((a) => (isRecord(a) && typeof a.$b === 'string' ? Buffer.from(a.$b, 'base64') : a));
}

/** `bytes` cut into parts of at most PART_BYTES (one empty part for nothing). */
export function partsOf(bytes: Uint8Array): Uint8Array[] {
  const parts: Uint8Array[] = [];
  for (let at = 0; at < bytes.length || parts.length === 0; at += PART_BYTES) parts.push(bytes.subarray(at, at + PART_BYTES));
  return parts;
}

export interface PartHeader {
  readonly id: string;
  readonly index: number;
  readonly count: number;
  /** Snapshots only: the last log sequence the snapshot holds. */
  readonly upto: number | undefined;
}

export function partHeaders(h: Omit<PartHeader, 'upto'> & { readonly upto?: number }): MsgHdrs {
  const hdrs = natsHeaders();
  hdrs.set(H_BATCH, h.id);
  hdrs.set(H_PART, `${h.index}/${h.count}`);
  if (h.upto !== undefined) hdrs.set(H_UPTO, String(h.upto));
  return hdrs;
}

export function readPartHeader(h: MsgHdrs | undefined): PartHeader | undefined {
  const id = h?.get(H_BATCH);
  const part = /^(\d+)\/(\d+)$/.exec(h?.get(H_PART) ?? '');
  if (!id || !part) return undefined;
  const upto = h?.get(H_UPTO);
  return { id, index: Number(part[1]), count: Number(part[2]), upto: upto ? Number(upto) : undefined };
}

/** Collects a run of parts into the whole they were cut from; a part out of order starts over. */
export class Assembler {
  #id: string | undefined;
  #parts: Uint8Array[] = [];

  /** The whole, once its last part came; undefined meanwhile (or for a run cut off by a crash). */
  add(h: PartHeader, data: Uint8Array): Buffer | undefined {
    if (h.index === 0) {
      this.#id = h.id;
      this.#parts = [];
    } else if (h.id !== this.#id || h.index !== this.#parts.length) {
      // A part whose run's start is gone (its writer died mid-run, or the log was cut): skipped.
      this.#id = undefined;
      return undefined;
    }
    this.#parts.push(data);
    if (h.index + 1 < h.count) return undefined;
    this.#id = undefined;
    const whole = Buffer.concat(this.#parts);
    this.#parts = [];
    return whole;
  }
}
