import type { Logger } from '@nestjs/common';

/**
 * Listeners by event type, called in the order they subscribed. Not Node's EventEmitter: its
 * `'error'` event throws when nobody listens, and a lock library must never crash the app
 * because an observer is missing or throws. A listener that throws or rejects is logged.
 */
export class Listeners<Type extends string, Event extends { readonly type: Type }> {
  private readonly byType = new Map<Type, Set<(event: Event) => unknown>>();

  constructor(
    private readonly logger: Logger,
    /** What the events are, for the log line of a failed listener (`lock`, `leadership`). */
    private readonly what: string,
  ) {}

  /** Subscribes; returns the unsubscribe function. */
  on(type: Type, listener: (event: Event) => unknown): () => void {
    let set = this.byType.get(type);
    if (!set) this.byType.set(type, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** Whether anyone listens for `type`. */
  listening(type: Type): boolean {
    const set = this.byType.get(type);
    return set !== undefined && set.size > 0;
  }

  /** Calls every listener of `event.type`. */
  emit(event: Event): void {
    for (const listener of this.byType.get(event.type) ?? []) {
      try {
        const result = listener(event);
        // An async listener's rejection must not become an unhandled rejection either.
        if (result && typeof (result as Promise<unknown>).then === 'function') {
          (result as Promise<unknown>).then(undefined, (err: unknown) =>
            this.logger.error(
              `${this.what} event listener for "${event.type}" failed`,
              (err as Error)?.stack,
            ),
          );
        }
      } catch (err) {
        this.logger.error(
          `${this.what} event listener for "${event.type}" threw`,
          (err as Error)?.stack,
        );
      }
    }
  }
}
