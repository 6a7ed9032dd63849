/** `handle.events`: the turn's stream events as an async iterable that ends when the turn settles. */
import type { TurnStreamEvent } from "../params.js";

/** A push-to-pull queue: events pushed before anyone iterates are kept (a turn's stream is small). */
export interface TurnEventStream extends AsyncIterable<TurnStreamEvent> {
  push(event: TurnStreamEvent): void;
  end(): void;
}

/** Create the stream of one attempt. Several iterators each see the events from the start. */
export function createTurnEventStream(): TurnEventStream {
  const events: TurnStreamEvent[] = [];
  let ended = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of [...waiters]) w();
    waiters.clear();
  };
  return {
    push(event) {
      if (ended) return;
      events.push(event);
      wake();
    },
    end() {
      ended = true;
      wake();
    },
    [Symbol.asyncIterator](): AsyncIterator<TurnStreamEvent> {
      let index = 0;
      let closed = false;
      return {
        async next(): Promise<IteratorResult<TurnStreamEvent>> {
          while (!closed && index >= events.length && !ended) await new Promise<void>((resolve) => waiters.add(resolve));
          if (closed) return { value: undefined, done: true };
          if (index < events.length) return { value: events[index++]!, done: false };
          return { value: undefined, done: true };
        },
        async return(): Promise<IteratorResult<TurnStreamEvent>> {
          closed = true;
          return { value: undefined, done: true };
        },
      };
    },
  };
}
