// The in-process event bus. Topics are dot-separated; a subscription glob may use `*` for exactly
// one segment and `**` for zero or more segments, anywhere. Subscriptions live in a segment trie,
// so publishing costs the depth of the topic, not the number of subscribers.
//
// publish() is synchronous and never throws: a subscriber's exception is logged and dropped, and
// an async subscriber is scheduled (its rejection is logged too). This keeps the runtime's atomic
// steps atomic: nothing a subscriber does can interleave with, or abort, the publisher.
import type { Logger } from '../log.ts';
import { silentLogger } from '../log.ts';

export interface EventEnvelope {
  readonly type: string;
  /** Unix seconds (float). */
  readonly ts: number;
  /** What produced the event (a subagent or delegation id, or `subrun`). */
  readonly src: string;
  readonly [field: string]: unknown;
}

export type Subscriber = (event: EventEnvelope) => void | Promise<void>;

interface Subscription {
  readonly order: number;
  readonly fn: Subscriber;
  readonly async: boolean;
}

class Node {
  readonly children = new Map<string, Node>();
  star: Node | undefined;
  globstar: Node | undefined;
  readonly subs = new Set<Subscription>();

  get empty(): boolean {
    return this.subs.size === 0 && this.children.size === 0 && !this.star && !this.globstar;
  }
}

/** Topics whose matches the bus remembers (see #matchCache). */
const MATCH_CACHE_TOPICS = 1024;

export interface EventBusOptions {
  readonly logger?: Logger;
  /** Unix milliseconds; stamps `ts` when a payload has none. */
  readonly now?: () => number;
  readonly src?: string;
}

export class EventBus {
  readonly #root = new Node();
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #src: string;
  #order = 0;
  /**
   * The subscriptions matching each recently published topic, in subscription order. A runtime
   * publishes a handful of topics over and over, so a repeat costs one Map lookup instead of a
   * trie walk, a Set and a sort. Emptied whenever a subscription comes or goes (a publish already
   * under way keeps the array it took), and dropped whole past MATCH_CACHE_TOPICS topics.
   */
  readonly #matchCache = new Map<string, readonly Subscription[]>();

  constructor(options: EventBusOptions = {}) {
    this.#logger = options.logger ?? silentLogger;
    this.#now = options.now ?? Date.now;
    this.#src = options.src ?? 'subrun';
  }

  /** Subscribes `fn` to every topic matching `glob`; returns the unsubscribe function. */
  subscribe(glob: string, fn: Subscriber): () => void {
    const segments = glob.split('.');
    let node = this.#root;
    const path: Array<[Node, string]> = [];
    for (const seg of segments) {
      path.push([node, seg]);
      node = this.#child(node, seg);
    }
    const sub: Subscription = { order: ++this.#order, fn, async: fn.constructor.name === 'AsyncFunction' };
    node.subs.add(sub);
    this.#matchCache.clear();
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      node.subs.delete(sub);
      this.#matchCache.clear();
      // Prune empty branches so churned subscriptions do not leave the trie growing.
      for (let i = path.length - 1; i >= 0; i--) {
        const [parent, seg] = path[i] as [Node, string];
        const child = seg === '*' ? parent.star : seg === '**' ? parent.globstar : parent.children.get(seg);
        if (!child || !child.empty) break;
        if (seg === '*') parent.star = undefined;
        else if (seg === '**') parent.globstar = undefined;
        else parent.children.delete(seg);
      }
    };
  }

  /** Whether any subscription matches `topic` (so a publisher can skip building the payload). */
  hasSubscribers(topic: string): boolean {
    return this.#matching(topic).length > 0;
  }

  /** Delivers `{type: topic, ts, src, ...payload}` to every matching subscriber. Never throws. */
  publish(topic: string, payload: Record<string, unknown> = {}): EventEnvelope {
    const ts = typeof payload.ts === 'number' ? payload.ts : this.#now() / 1000;
    const src = typeof payload.src === 'string' ? payload.src : this.#src;
    // The head first and the payload spread after it in one literal (a spread copy that then gains
    // keys is far slower on V8); the type holds once the head is written back where overridden.
    const event: { type: string; ts: number; src: string; [field: string]: unknown } = { type: topic, ts, src, ...payload };
    if (event.type !== topic) event.type = topic;
    if (event.ts !== ts) event.ts = ts;
    if (event.src !== src) event.src = src;
    // The cache hit inline (the common case); a miss walks the trie.
    const matched = this.#matchCache.get(topic) ?? this.#matching(topic);
    for (const sub of matched) {
      if (sub.async) {
        queueMicrotask(() => this.#call(sub, event, topic));
      } else {
        this.#call(sub, event, topic);
      }
    }
    return event;
  }

  /** The subscriptions matching `topic`, in subscription order (cached per topic). */
  #matching(topic: string): readonly Subscription[] {
    let matched = this.#matchCache.get(topic);
    if (matched !== undefined) return matched;
    try {
      const found = new Set<Subscription>();
      this.#match(this.#root, topic.split('.'), 0, found);
      matched = [...found].sort((a, b) => a.order - b.order);
    } catch (err) {
      this.#logger.error({ err, topic }, 'event matching failed');
      return [];
    }
    if (this.#matchCache.size >= MATCH_CACHE_TOPICS) this.#matchCache.clear();
    this.#matchCache.set(topic, matched);
    return matched;
  }

  #call(sub: Subscription, event: EventEnvelope, topic: string): void {
    try {
      const result = sub.fn(event);
      if (result && typeof result.then === 'function') {
        result.then(undefined, (err: unknown) => {
          this.#logger.error({ err, topic }, 'event subscriber rejected');
        });
      }
    } catch (err) {
      this.#logger.error({ err, topic }, 'event subscriber threw');
    }
  }

  #child(node: Node, seg: string): Node {
    if (seg === '*') return (node.star ??= new Node());
    if (seg === '**') return (node.globstar ??= new Node());
    let child = node.children.get(seg);
    if (!child) {
      child = new Node();
      node.children.set(seg, child);
    }
    return child;
  }

  #match(node: Node, segs: readonly string[], i: number, out: Set<Subscription>): void {
    if (node.globstar) {
      // `**` swallows zero or more segments: try the rest of the pattern at every suffix.
      for (let j = i; j <= segs.length; j++) this.#match(node.globstar, segs, j, out);
    }
    const seg = segs[i];
    if (seg === undefined) {
      // Past the topic's last segment.
      for (const s of node.subs) out.add(s);
      return;
    }
    const exact = node.children.get(seg);
    if (exact) this.#match(exact, segs, i + 1, out);
    if (node.star) this.#match(node.star, segs, i + 1, out);
  }
}
