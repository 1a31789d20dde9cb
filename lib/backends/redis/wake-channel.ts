import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { withTimeout } from '../../core/shared/timers';
import type { SubscriberPort } from './port/redis-port';
import { RedisConnection } from './redis-connection';
import type { RedisStore } from './redis-store';

/**
 * This backend's wake-up channel: a release names the next waiter's token here. One channel per
 * backend instance (not per key) costs one SUBSCRIBE for the life of the process and spares
 * every other process the wake-up. The subscriber connection is made on the first wait, never
 * before: a process whose keys are always free never opens it.
 */
export class WakeChannel {
  /** The channel's name (under the module's prefix). */
  readonly name: string;
  /**
   * The SUBSCRIBE was answered: waiters queue from their first attempt (the client subscribes
   * again by itself after a reconnect, so it stays true).
   */
  listening = false;
  // ES-private: util.inspect of a lock handle reaches the backend, and must not print a
  // client's options (its password).
  #subscriber?: { port: SubscriberPort; connection: RedisConnection };
  /** Pending or done SUBSCRIBE (dropped on failure, so the next waiter retries). */
  private subscribed?: Promise<unknown>;
  private warnedNoSubscribe = false;

  constructor(
    private readonly store: RedisStore,
    /** Gets each message published on the channel: "<tagged token> <fence> <slot>". */
    private readonly onMessage: (message: string) => void,
  ) {
    this.name = store.keyspace.channel(randomBytes(12).toString('hex'));
  }

  /**
   * Subscribes once. `false` when Redis refuses it (an ACL user without channel permissions):
   * waiters then poll instead of failing. A Redis that does not answer within `maxMs` fails the
   * wait.
   */
  async subscribe(maxMs: number): Promise<boolean> {
    const { store } = this;
    // The store is known to be down: the subscriber's first connection would only find out later.
    if (store.connection.isDown()) throw store.connection.error();
    if (!this.subscribed) {
      const { port, connection } = this.subscriber();
      const subscribed = connection.run(() => port.subscribe(this.name, this.onMessage));
      subscribed.catch(() => {
        if (this.subscribed === subscribed) this.subscribed = undefined;
      });
      this.subscribed = subscribed;
    }
    try {
      await withTimeout(this.subscribed, maxMs, {
        onTimeout: () => new Error(`SUBSCRIBE got no answer in ${Math.round(maxMs)} ms`),
      });
      this.listening = true;
      return true;
    } catch (err) {
      const said = store.redactor.message(err);
      if (!/NOPERM|permission/i.test(said)) throw err;
      if (!this.warnedNoSubscribe) {
        this.warnedNoSubscribe = true;
        new Logger('LockService').warn(
          `redis backend "${store.backendName}": SUBSCRIBE refused (${said}); waiters poll ` +
            'instead of being told of a hand-over. Allow the user the channels under the key ' +
            `prefix (ACL "&${store.keyspace.prefix}*").`,
        );
      }
      return false;
    }
  }

  /** Ends the subscriber connection, if one was made. */
  async close(): Promise<void> {
    const subscriber = this.#subscriber;
    if (!subscriber) return;
    await subscriber.port.close();
    subscriber.connection.detach();
  }

  /** The subscriber connection, made on first use (whoever made the main client). */
  private subscriber(): { port: SubscriberPort; connection: RedisConnection } {
    if (!this.#subscriber) {
      const port = this.store.port.subscriber();
      const connection = new RedisConnection(
        port,
        this.store.redactor,
        `redis backend "${this.store.backendName}" subscriber`,
        'always',
      );
      this.#subscriber = { port, connection };
    }
    return this.#subscriber;
  }
}
