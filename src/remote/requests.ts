// Request-reply over one inbox subscription of our own, for the paths every child and every steer
// take: an assignment, an interrupt, a taken receipt, a spawn, a steer's publish ack. The client's
// own request() builds an Error with a captured stack for every request it completes, even with
// noAsyncTraces (its RequestOne.cancel rejects the settled promise with a fresh RequestError):
// 28 µs a request on this machine, the largest single item of a remote steer's CPU on the control
// plane after the socket writes (bench: remote.steer_queued_p50, remote.cp_cpu_per_child).
import { createInbox, headers as natsHeaders, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';

/** Why a request got no answer: nobody answered in time, nobody listens on the subject, or the connection closed. */
export type NoAnswerReason = 'timeout' | 'no_responders' | 'closed';

export class NoAnswerError extends Error {
  override readonly name = 'NoAnswerError';
  readonly reason: NoAnswerReason;

  constructor(reason: NoAnswerReason, subject: string) {
    super(reason === 'timeout' ? `no answer on ${subject} in time` : reason === 'no_responders' ? `no responders on ${subject}` : 'the NATS connection closed');
    this.reason = reason;
  }
}

/** A JetStream publish the stream answered with an error: it did not store the message. */
export class PublishRefusedError extends Error {
  override readonly name = 'PublishRefusedError';
}

export interface RequestOptions {
  readonly timeout: number;
  readonly headers?: MsgHdrs;
}

interface Pending {
  readonly subject: string;
  readonly resolve: (m: Msg) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

const decoder = new TextDecoder();

export class Requests {
  readonly #nc: NatsConnection;
  /** The inbox's subjects are `<prefix><token>`; one wildcard subscription takes every answer. */
  readonly #prefix: string;
  readonly #pending = new Map<string, Pending>();
  #next = 0;

  constructor(nc: NatsConnection) {
    this.#nc = nc;
    this.#prefix = `${createInbox()}.`;
    // Subscribed before any request is published on this connection, so the server has the
    // interest by the time an answer comes (the client sends its protocol lines in order).
    nc.subscribe(`${this.#prefix}*`, {
      callback: (err, m) => {
        // An error on the subscription itself (a permission): the requests time out.
        if (err === null) this.#answer(m);
      },
    });
    void nc.closed().then(() => {
      for (const [token, p] of this.#pending) this.#settle(token, p).reject(new NoAnswerError('closed', p.subject));
    });
  }

  /** Publishes `data` on `subject` and resolves with the first answer; a NoAnswerError otherwise. */
  request(subject: string, data: Uint8Array | string, opts: RequestOptions): Promise<Msg> {
    const token = (++this.#next).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const timer = setTimeout(() => {
        const p = this.#pending.get(token);
        if (p) this.#settle(token, p).reject(new NoAnswerError('timeout', subject));
      }, opts.timeout);
      const pending: Pending = { subject, resolve, reject, timer };
      this.#pending.set(token, pending);
      try {
        this.#nc.publish(subject, data, { reply: this.#prefix + token, ...(opts.headers ? { headers: opts.headers } : {}) });
      } catch (err) {
        // Closed (or draining): it never left.
        this.#settle(token, pending).reject(this.#nc.isClosed() ? new NoAnswerError('closed', subject) : asError(err));
      }
    });
  }

  /**
   * A JetStream publish with its message id (a retry within the stream's duplicate window is
   * stored once), resolved once the stream has stored it. No stream on the subject: NoAnswerError
   * `no_responders`; the stream's own refusal (a limit, no storage left): PublishRefusedError.
   * An answer that is no ack at all is a plain Error: whether it was stored is unknown.
   */
  async publishAck(subject: string, data: Uint8Array | string, opts: { readonly msgID: string; readonly timeout: number }): Promise<void> {
    const headers = natsHeaders();
    headers.set('Nats-Msg-Id', opts.msgID);
    const m = await this.request(subject, data, { timeout: opts.timeout, headers });
    const ack: unknown = JSON.parse(decoder.decode(m.data));
    if (typeof ack !== 'object' || ack === null) throw new Error(`not a publish ack on ${subject}`);
    if ('error' in ack) {
      const e = ack.error;
      throw new PublishRefusedError(typeof e === 'object' && e !== null && 'description' in e ? String(e.description) : 'refused by the stream');
    }
    if (!('stream' in ack) || typeof ack.stream !== 'string' || ack.stream === '') throw new Error(`not a publish ack on ${subject}`);
  }

  #answer(m: Msg): void {
    const token = m.subject.slice(this.#prefix.length);
    const p = this.#pending.get(token);
    if (!p) return;
    this.#settle(token, p);
    // No responders: the server's status message, empty, code 503.
    if (m.data.length === 0 && m.headers?.code === 503) p.reject(new NoAnswerError('no_responders', p.subject));
    else p.resolve(m);
  }

  #settle(token: string, p: Pending): Pending {
    this.#pending.delete(token);
    clearTimeout(p.timer);
    return p;
  }
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
