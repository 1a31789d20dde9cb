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

/** Whether a request is a plain mutex (exclusive, one permit): the lean scripts serve it. */
export function isMutex({ mode, permits = 1 }: GrantRequest): boolean {
  return mode !== 'shared' && permits === 1;
}

/**
 * A mutex's lean attempt (see `scripts/mutex.ts`): the fence (a number, as the store replies it)
 * when the key was free and nobody waited for it, else `null` (nothing taken: the general
 * {@link attempt} decides). The whole uncontended cycle goes this way. A call failed because the
 * connection dropped may still run when the client resends it after reconnecting: what it then
 * took is given back.
 */
export function leanAttempt(
  store: RedisStore,
  names: RedisLockNames,
  request: GrantRequest,
): Promise<unknown> {
  const { token, ttlMs } = request;
  return store
    .keyScript(MUTEX_ACQUIRE, names, [token, ttlMs], undoer(store, names, token, ''), 3)
    .then((fence) => {
      names.contended = fence === null;
      return fence;
    });
}

/**
 * One acquisition attempt by the general script (`ACQUIRE`); a positive waiter ttl queues (or
 * keeps queued) the caller as `member`. An attempt failed because the connection dropped may
 * still run when the client resends it after reconnecting: whatever it then took (the lock, a
 * place in the queue) is given back. A request whose permits disagree with the key's holders is
 * refused (`LockConfigError`).
 */
export async function attempt(
  store: RedisStore,
  names: RedisLockNames,
  request: GrantRequest,
  waiterTtlMs: number,
  member = '',
): Promise<AttemptReply> {
  const { token, ttlMs, permits = 1 } = request;
  const mode = request.mode === 'shared' ? 's' : 'x';
  const reply = (await store.keyScript(
    ACQUIRE,
    names,
    [token, ttlMs, waiterTtlMs, member, mode, permits],
    undoer(store, names, token, member),
  )) as AttemptReply;
  if (reply[0] === -1) throw permitsDisagreement(request.key, reply[1], permits);
  return reply;
}

/** Gives back what a late reply of an abandoned attempt took (the lock, a place in the queue). */
function undoer(
  store: RedisStore,
  names: RedisLockNames,
  token: string,
  member: string,
): (late: Promise<unknown>) => void {
  return (late) => {
    late
      .then(() => store.runRaw(LEAVE, store.keysOf(names), [member, token]))
      .catch(() => undefined);
  };
}
