// runtime.events: the bus as its subscribers see it, each event typed by its `type` (the contract's
// busEventPayloadSchemas), so `e.type === 'subagent.complete'` narrows `e.entry` to the entry.
import { EVENT_TYPES, type BusEvent, type EventType } from '../contract/events.ts';
import type { EventBus, EventEnvelope as LooseEnvelope, Subscriber as LooseSubscriber } from '../registry/events.ts';

/** An in-process event: the union of every event type's `{type, ts, src, ...payload}`. */
export type EventEnvelope = BusEvent;
export type Subscriber = (event: EventEnvelope) => void | Promise<void>;

/**
 * The runtime's events by type: `runtime.events.subscribe('subagent.**', (e) => ...)`, and after
 * `e.type === 'subagent.complete'`, `e.entry` is the completion entry (docs/delegation.md, "Events").
 */
export interface RuntimeEvents {
  /** Subscribes `fn` to every topic matching `glob` (`*` one segment, `**` any); returns the unsubscribe. */
  subscribe(glob: string, fn: Subscriber): () => void;
  /** Whether any subscription matches `topic`. */
  hasSubscribers(topic: string): boolean;
}

const TYPES: ReadonlySet<string> = new Set<EventType>(EVENT_TYPES);

/**
 * The runtime publishes only its own event types, each payload as its schema says (the catalog
 * test parses every one with parseBusEvent); the type name is what is checked here, per event.
 */
function isBusEvent(e: LooseEnvelope): e is BusEvent {
  return TYPES.has(e.type);
}

export function typedEvents(bus: EventBus): RuntimeEvents {
  return {
    subscribe(glob, fn) {
      // The bus runs an async subscriber in a microtask of its own: the wrapper keeps its kind.
      const loose: LooseSubscriber =
        fn.constructor.name === 'AsyncFunction'
          ? async (e) => {
              if (isBusEvent(e)) await fn(e);
            }
          : (e) => (isBusEvent(e) ? fn(e) : undefined);
      return bus.subscribe(glob, loose);
    },
    hasSubscribers: (topic) => bus.hasSubscribers(topic),
  };
}
