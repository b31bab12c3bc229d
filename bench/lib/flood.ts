// The lean client side of pipelined stdio load (RpcClient.flood in rpc.ts): requests framed by
// concatenation, replies counted by their framing and parsed only one in FLOOD_CHECK_EVERY. The
// full parse of every 2.4 KB reply cost the bench's client more CPU than the servers it measured
// spent, so the pipelined figure was the client's.

export type Flood = (method: string, params: Record<string, unknown>, inflight: number, durationMs: number) => Promise<FloodResult>;

export interface FloodResult {
  readonly opsPerSec: number;
  readonly completed: number;
  /** The bench process's own CPU per reply over the run, µs (user + system). */
  readonly clientCpuPerOp: number;
  /** The bench process's CPU over the run as a share of one core (1 = a whole core: client-bound). */
  readonly clientCoreShare: number;
}

/** One reply in this many is parsed in full and must be a result (no error). */
const FLOOD_CHECK_EVERY = 256;

/**
 * Drives a flood over a framed stream: `send(id)` writes one request; the caller's reader calls
 * the returned `replied(text?)` once per reply frame (with the frame's text for the ones checked).
 */
export class FloodRun {
  #active = 0;
  #sent = 0;
  #completed = 0;
  #deadline = 0;
  #done: (() => void) | undefined;
  #fail: ((err: Error) => void) | undefined;

  constructor(
    private readonly send: (id: number) => void,
    private readonly inflight: number,
  ) {}

  /** True when the next reply is one the reader must hand over in full. */
  get checkNext(): boolean {
    return (this.#completed + 1) % FLOOD_CHECK_EVERY === 0;
  }

  async run(durationMs: number): Promise<FloodResult> {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    this.#deadline = t0 + durationMs;
    await new Promise<void>((resolve, reject) => {
      this.#done = resolve;
      this.#fail = reject;
      this.#pump();
    });
    const wallUs = (performance.now() - t0) * 1000;
    const cpu = process.cpuUsage(cpu0);
    const cpuUs = cpu.user + cpu.system;
    return {
      opsPerSec: this.#completed / (wallUs / 1e6),
      completed: this.#completed,
      clientCpuPerOp: cpuUs / Math.max(1, this.#completed),
      clientCoreShare: cpuUs / wallUs,
    };
  }

  replied(text?: string): void {
    if (text !== undefined) {
      const msg = JSON.parse(text) as { result?: unknown; error?: unknown };
      if (msg.error !== undefined || msg.result === undefined) {
        this.#fail?.(new Error(`flood: a reply was not a result: ${text.slice(0, 200)}`));
        return;
      }
    }
    this.#active--;
    this.#completed++;
    this.#pump();
  }

  failed(err: Error): void {
    this.#fail?.(err);
  }

  #pump(): void {
    if (performance.now() < this.#deadline) {
      while (this.#active < this.inflight) {
        this.#active++;
        this.#sent++;
        this.send(this.#sent);
      }
    } else if (this.#active === 0) this.#done?.();
  }
}

/** The request's text for id `id`, made by concatenation around one stringify of the rest. */
export function requestText(method: string, params: Record<string, unknown>): (id: number) => string {
  const tail = `,"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`;
  return (id) => `{"jsonrpc":"2.0","id":${id}${tail}`;
}
