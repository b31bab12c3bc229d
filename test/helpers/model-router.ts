// Scripted replies for the fake model server, routed by sender: each request goes to the queue of
// the parent agent or of the child with that goal (read from the request's system prompt and task
// message), so a test scripts a whole delegation without caring in which order the requests land.
import type { FakeModel, RecordedRequest, ScriptedReply } from './fake-model.ts';

export type Reply = ScriptedReply | ((req: RecordedRequest) => ScriptedReply);

export const PARENT = 'You are the parent agent';
export const CHILD = 'You are a subagent';

export const systemOf = (req: RecordedRequest) => req.body.messages[0]?.content ?? '';
/** A child's goal, from its task message `Task: <goal>[\n\nContext: ...]`. */
export const goalOf = (req: RecordedRequest) => (req.body.messages[1]?.content ?? '').replace(/^Task: /, '').split('\n')[0] ?? '';

export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Routes each request to the scripted replies of its sender. A parent with nothing scripted gets
 * `parentFallback`; any other sender with nothing scripted gets a 400 (never retried) naming it.
 */
export class ModelRouter {
  readonly parent: Reply[] = [];
  readonly children = new Map<string, Reply[]>();
  readonly parentRequests: RecordedRequest[] = [];
  readonly childRequests = new Map<string, RecordedRequest[]>();
  parentFallback: Reply | undefined;
  readonly #model: FakeModel;

  constructor(model: FakeModel, parentFallback?: Reply) {
    this.#model = model;
    this.parentFallback = parentFallback;
    model.reply((req) => this.#route(req));
  }

  child(goal: string, ...replies: Reply[]): this {
    this.children.set(goal, [...(this.children.get(goal) ?? []), ...replies]);
    return this;
  }

  #route(req: RecordedRequest): ScriptedReply {
    this.#model.reply((r) => this.#route(r));
    const system = systemOf(req);
    let next: Reply | undefined;
    if (system.startsWith(PARENT)) {
      this.parentRequests.push(req);
      next = this.parent.shift() ?? this.parentFallback;
    } else if (system.startsWith(CHILD)) {
      const goal = goalOf(req);
      this.childRequests.set(goal, [...(this.childRequests.get(goal) ?? []), req]);
      next = this.children.get(goal)?.shift();
    }
    const reply = typeof next === 'function' ? next(req) : next;
    return reply ?? { status: 400, body: JSON.stringify({ error: { message: `nothing scripted for ${system.slice(0, 30)} / ${goalOf(req)}` } }) };
  }
}
