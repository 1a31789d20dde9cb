import type { GrantRequest } from '../../core/contract/lock-backend';
import { permitsDisagreement } from '../../core/shared/permits-disagreement';
import type { RedisLockNames } from './redis-keys';
import type { RedisStore } from './redis-store';
import { ACQUIRE } from './scripts/acquire';
import { LEAVE } from './scripts/leave';
import { MUTEX_ACQUIRE } from './scripts/mutex';

/** A script's answer to an acquisition attempt: `[code, fence or ms, slot]` (see `ACQUIRE`). */
export type AttemptReply = [number, number, number?];

/**
 * A waiter's token as its queue member carries it: tagged with what it asks (`<token>|s`
 * shared, `<token>|p<n>` one of n permits, the bare token for a mutex), so a script admitting
 * the queue's head knows whether it fits beside the holders.
 */
export function taggedToken({ token, mode, permits = 1 }: GrantRequest): string {
  if (mode === 'shared') return `${token}|s`;
  return permits === 1 ? token : `${token}|p${permits}`;
}

/**
 * One acquisition attempt; a positive waiter ttl queues (or keeps queued) the caller as
 * `member`. With `lean`, a mutex first tries the lean script (a free key nobody waits for: the
 * whole uncontended cycle), then, if the key is busy or of another kind, the general one; a
 * waiter that already found the key busy goes straight to the general one. An attempt
 * failed because the connection dropped may still run when the client resends it after
 * reconnecting: whatever it then took (the lock, a place in the queue) is given back. A request
 * whose permits disagree with the key's holders is refused (`LockConfigError`).
 */
export async function attempt(
  store: RedisStore,
  names: RedisLockNames,
  request: GrantRequest,
  waiterTtlMs: number,
  member = '',
  lean = true,
): Promise<AttemptReply> {
  const { token, ttlMs, permits = 1 } = request;
  const mode = request.mode === 'shared' ? 's' : 'x';
  const undo = (late: Promise<unknown>): void => {
    late
      .then(() => store.runRaw(LEAVE, store.keysOf(names), [member, token]))
      .catch(() => undefined);
  };
  if (lean && mode === 'x' && permits === 1) {
    const fence = await store.keyScript(MUTEX_ACQUIRE, names, [token, ttlMs], undo, 3);
    if (fence !== null) return [1, Number(fence), 0];
  }
  const reply = (await store.keyScript(
    ACQUIRE,
    names,
    [token, ttlMs, waiterTtlMs, member, mode, permits],
    undo,
  )) as AttemptReply;
  if (reply[0] === -1) throw permitsDisagreement(request.key, reply[1], permits);
  return reply;
}
