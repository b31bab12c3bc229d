import { describe, expect, it } from 'vitest';
import { EventBus, type EventEnvelope } from '../../src/registry/events.ts';
import { flush } from '../helpers/manual-clock.ts';

const NOW = 1_700_000_123_456;

function bus(): EventBus {
  return new EventBus({ now: () => NOW });
}

/** Subscribes `glob` and returns the list of topics it received. */
function recorder(b: EventBus, glob: string): string[] {
  const got: string[] = [];
  b.subscribe(glob, (e) => {
    got.push(e.type);
  });
  return got;
}

const TOPICS = [
  'a',
  'a.b',
  'a.z',
  'a.b.z',
  'a.b.c.z',
  'a.b.c',
  'b.z',
  'subagent',
  'subagent.start',
  'subagent.steer.delivered',
  'subagent.complete',
  'delegation.complete',
  'x.subagent.complete',
  'completed',
];

function matches(glob: string): string[] {
  const b = bus();
  const got = recorder(b, glob);
  for (const t of TOPICS) b.publish(t);
  return got;
}

describe('EventBus matching', () => {
  it('an exact topic matches only itself', () => {
    expect(matches('subagent.start')).toEqual(['subagent.start']);
    expect(matches('a')).toEqual(['a']);
    expect(matches('a.b')).toEqual(['a.b']);
    expect(matches('nothing.here')).toEqual([]);
  });

  it('`*` matches exactly one segment', () => {
    expect(matches('subagent.*')).toEqual(['subagent.start', 'subagent.complete']);
    expect(matches('*')).toEqual(['a', 'subagent', 'completed']);
    expect(matches('*.z')).toEqual(['a.z', 'b.z']);
    expect(matches('a.*.z')).toEqual(['a.b.z']);
    expect(matches('*.complete')).toEqual(['subagent.complete', 'delegation.complete']);
    expect(matches('*.*.*')).toEqual(['a.b.z', 'a.b.c', 'subagent.steer.delivered', 'x.subagent.complete']);
  });

  it('`subagent.**` matches zero or more segments after the prefix', () => {
    expect(matches('subagent.**')).toEqual(['subagent', 'subagent.start', 'subagent.steer.delivered', 'subagent.complete']);
  });

  it('`**.complete` matches the last segment at any depth', () => {
    expect(matches('**.complete')).toEqual(['subagent.complete', 'delegation.complete', 'x.subagent.complete']);
  });

  it('`a.**.z` matches zero or more segments in the middle', () => {
    expect(matches('a.**.z')).toEqual(['a.z', 'a.b.z', 'a.b.c.z']);
  });

  it('`**` alone matches every topic', () => {
    expect(matches('**')).toEqual(TOPICS);
  });

  it('`**` combines with `*`', () => {
    expect(matches('**.*.z')).toEqual(['a.z', 'a.b.z', 'a.b.c.z', 'b.z']);
    expect(matches('a.*.**')).toEqual(['a.b', 'a.z', 'a.b.z', 'a.b.c.z', 'a.b.c']);
  });

  it('segments match whole, not as prefixes', () => {
    expect(matches('complete')).toEqual([]);
    expect(matches('**.completed')).toEqual(['completed']);
  });

  it('a subscriber matched by several paths is called once per publish', () => {
    const b = bus();
    let calls = 0;
    b.subscribe('**.**', () => {
      calls++;
    });
    b.publish('a.b.c');
    expect(calls).toBe(1);
    const b2 = bus();
    let calls2 = 0;
    b2.subscribe('a.**.**.z', () => {
      calls2++;
    });
    b2.publish('a.z');
    b2.publish('a.q.r.z');
    expect(calls2).toBe(2);
  });
});

describe('EventBus envelope', () => {
  it('is {type, ts, src, ...payload} with ts in unix seconds and src defaulting to subrun', () => {
    const b = bus();
    const got: EventEnvelope[] = [];
    b.subscribe('x.y', (e) => {
      got.push(e);
    });
    const returned = b.publish('x.y', { a: 1, nested: { k: 'v' } });
    expect(got).toHaveLength(1);
    expect(got[0]).toEqual({ type: 'x.y', ts: NOW / 1000, src: 'subrun', a: 1, nested: { k: 'v' } });
    expect(Object.keys(got[0]!).slice(0, 3)).toEqual(['type', 'ts', 'src']);
    expect(returned).toEqual(got[0]);
  });

  it('keeps ts and src from the payload when present', () => {
    const b = bus();
    const got: EventEnvelope[] = [];
    b.subscribe('**', (e) => {
      got.push(e);
    });
    b.publish('t', { ts: 42.5, src: 'sa_9', k: true });
    expect(got[0]).toEqual({ type: 't', ts: 42.5, src: 'sa_9', k: true });
  });

  it('ignores a ts or src of the wrong type, and a payload `type` never overrides the topic', () => {
    const b = bus();
    const got: EventEnvelope[] = [];
    b.subscribe('t', (e) => {
      got.push(e);
    });
    const e = b.publish('t', { ts: 'yesterday', src: 7, type: 'other', k: 1 });
    expect(e).toEqual({ type: 't', ts: NOW / 1000, src: 'subrun', k: 1 });
    expect(Object.keys(e)).toEqual(['type', 'ts', 'src', 'k']);
    expect(got).toEqual([e]);
  });

  it('uses the configured src', () => {
    const b = new EventBus({ now: () => 2000, src: 'custom' });
    expect(b.publish('t')).toEqual({ type: 't', ts: 2, src: 'custom' });
  });

  it('publish with no subscribers returns the envelope and does not throw', () => {
    expect(bus().publish('lonely', { n: 1 })).toEqual({ type: 'lonely', ts: NOW / 1000, src: 'subrun', n: 1 });
  });
});

describe('EventBus subscriptions', () => {
  it('unsubscribe stops delivery; calling it twice is harmless', () => {
    const b = bus();
    const got: string[] = [];
    const off = b.subscribe('a.*', (e) => {
      got.push(e.type);
    });
    b.publish('a.one');
    off();
    b.publish('a.two');
    off();
    b.publish('a.three');
    expect(got).toEqual(['a.one']);
  });

  it('a second unsubscribe does not remove another subscription on the same glob', () => {
    const b = bus();
    const got: string[] = [];
    const off1 = b.subscribe('a.b', () => {
      got.push('one');
    });
    off1();
    b.subscribe('a.b', () => {
      got.push('two');
    });
    off1();
    b.publish('a.b');
    expect(got).toEqual(['two']);
  });

  it('unsubscribing one of two identical subscriptions keeps the other', () => {
    const b = bus();
    const got: string[] = [];
    const fn = (e: EventEnvelope) => {
      got.push(e.type);
    };
    const off1 = b.subscribe('a.**', fn);
    b.subscribe('a.**', fn);
    b.publish('a.x');
    expect(got).toEqual(['a.x', 'a.x']);
    off1();
    b.publish('a.y');
    expect(got).toEqual(['a.x', 'a.x', 'a.y']);
  });

  it('unsubscribing a deep glob keeps a shallower one on the same path', () => {
    const b = bus();
    const got: string[] = [];
    b.subscribe('a', () => {
      got.push('shallow');
    });
    const off = b.subscribe('a.b.c', () => {
      got.push('deep');
    });
    off();
    b.publish('a');
    b.publish('a.b.c');
    expect(got).toEqual(['shallow']);
    // Re-subscribing after the branch was pruned works.
    b.subscribe('a.b.c', () => {
      got.push('again');
    });
    b.publish('a.b.c');
    expect(got).toEqual(['shallow', 'again']);
  });

  it('subscribers run in subscription order, whatever glob matched them', () => {
    const b = bus();
    const order: string[] = [];
    b.subscribe('**', () => {
      order.push('1:**');
    });
    b.subscribe('subagent.start', () => {
      order.push('2:exact');
    });
    b.subscribe('subagent.*', () => {
      order.push('3:star');
    });
    b.subscribe('**.start', () => {
      order.push('4:tail');
    });
    b.subscribe('subagent.**', () => {
      order.push('5:prefix');
    });
    b.publish('subagent.start');
    expect(order).toEqual(['1:**', '2:exact', '3:star', '4:tail', '5:prefix']);
  });

  it('a throwing subscriber does not stop the others, and publish does not throw', () => {
    const b = bus();
    const got: string[] = [];
    b.subscribe('e', () => {
      got.push('before');
    });
    b.subscribe('e', () => {
      throw new Error('subscriber bug');
    });
    b.subscribe('e', () => {
      got.push('after');
    });
    expect(() => b.publish('e')).not.toThrow();
    expect(got).toEqual(['before', 'after']);
    // Still works next time.
    b.publish('e');
    expect(got).toEqual(['before', 'after', 'before', 'after']);
  });

  it('a subscriber throwing a non-Error is swallowed too', () => {
    const b = bus();
    let reached = false;
    b.subscribe('e', () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- a handler that throws a non-Error, on purpose
      throw 'a string';
    });
    b.subscribe('e', () => {
      reached = true;
    });
    expect(() => b.publish('e')).not.toThrow();
    expect(reached).toBe(true);
  });

  it('an async subscriber is scheduled, not run synchronously inside publish', async () => {
    const b = bus();
    const log: string[] = [];
    b.subscribe('e', async (e) => {
      log.push(`async ${e.type}`);
    });
    b.subscribe('e', () => {
      log.push('sync');
    });
    b.publish('e');
    log.push('after publish');
    expect(log).toEqual(['sync', 'after publish']);
    await flush(1);
    expect(log).toEqual(['sync', 'after publish', 'async e']);
  });

  it("an async subscriber's rejection is swallowed (no unhandled rejection) and others still run", async () => {
    const b = bus();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const got: string[] = [];
      b.subscribe('e', async () => {
        throw new Error('async subscriber bug');
      });
      b.subscribe('e', async () => {
        got.push('second async');
      });
      b.subscribe('e', () => {
        got.push('sync');
      });
      expect(() => b.publish('e')).not.toThrow();
      await flush();
      expect(got).toEqual(['sync', 'second async']);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('a sync subscriber returning a rejected promise is swallowed too', async () => {
    const b = bus();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      b.subscribe('e', () => Promise.reject(new Error('late failure')));
      b.publish('e');
      await flush();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('each subscriber receives the same envelope object', () => {
    const b = bus();
    const seen: EventEnvelope[] = [];
    b.subscribe('**', (e) => {
      seen.push(e);
    });
    b.subscribe('t', (e) => {
      seen.push(e);
    });
    const ret = b.publish('t', { v: 1 });
    expect(seen).toHaveLength(2);
    expect(seen[0]).toBe(ret);
    expect(seen[1]).toBe(ret);
  });
});
