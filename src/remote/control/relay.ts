// A worker's account of its child, replayed into the child's real context on the control plane:
// each transcript line, text, tool step, delivery and the finish, in the order the worker sent them.
import type { RunOutcome, RunnerContext, ToolCall } from '../../types.ts';
import type { WorkerEvent } from '../wire.ts';
import type { RemoteSteerLedger } from './steer-ledger.ts';

export class EventRelay {
  /** Tool steps started and not yet finished, by the worker's index. */
  readonly #tools = new Map<number, ToolCall>();
  readonly #ledger: RemoteSteerLedger;
  readonly #finish: (outcome: RunOutcome) => void;

  constructor(ledger: RemoteSteerLedger, finish: (outcome: RunOutcome) => void) {
    this.#ledger = ledger;
    this.#finish = finish;
  }

  apply(ctx: RunnerContext, ev: WorkerEvent): void {
    switch (ev.type) {
      case 'write':
        ctx.write(ev.line);
        break;
      case 'thinking':
        ctx.thinking(ev.text);
        break;
      case 'text':
        ctx.text(ev.text);
        break;
      case 'text_delta':
        ctx.textDelta(ev.text);
        break;
      case 'thinking_delta':
        ctx.thinkingDelta(ev.text);
        break;
      case 'tool':
        this.#tools.set(ev.i, ctx.startTool(ev.name, ev.args));
        break;
      case 'tool_end':
        this.#tools.get(ev.i)?.finish(ev.result, ev.ok);
        this.#tools.delete(ev.i);
        break;
      case 'delivered':
        this.#ledger.confirm(ev.steer_ids);
        break;
      case 'finish':
        this.#finish(ev.outcome);
        break;
    }
  }
}
