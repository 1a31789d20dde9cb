import type { StoreLockInfo } from '../../core/contract/lock-backend';
import type { RedisStore } from './redis-store';
import { FORCE_RELEASE } from './scripts/force-release';
import { INSPECT } from './scripts/inspect';

/**
 * What the store knows of a key (`LockService.inspect`): held or not, the holder's fence (else
 * the last one handed out), lease left, live waiters; for shared and counted holders also how
 * many, their mode, permits and slots.
 */
export async function inspectKey(store: RedisStore, fullKey: string): Promise<StoreLockInfo> {
  const names = store.keyspace.names(fullKey);
  return inspectInfo((await store.keyScript(INSPECT, names, [])) as unknown[]);
}

/**
 * Frees the key whoever holds it and hands it to the first in line, as a release would
 * (`LockService.forceRelease`); `true` when a holder was removed.
 */
export async function forceReleaseKey(store: RedisStore, fullKey: string): Promise<boolean> {
  const names = store.keyspace.names(fullKey);
  return Number(await store.keyScript(FORCE_RELEASE, names, [])) === 1;
}

/**
 * `StoreLockInfo` from an `INSPECT` reply: `{held, fence, pttl, waiting}` for a free key, then
 * the owner token for a mutex, or `holders, mode, permits, slot...` for shared or counted holders
 * (at least one slot, so never five elements).
 */
export function inspectInfo(reply: readonly unknown[]): StoreLockInfo {
  const [held, fence, left, waiting] = reply.slice(0, 4).map(Number);
  const info: StoreLockInfo = {
    held: held === 1,
    fence,
    remainingMs: held === 1 && left >= 0 ? left : undefined,
    waiting,
    holders: held === 1 ? 1 : 0,
  };
  if (reply.length <= 4) return info;
  if (reply.length === 5) return { ...info, owner: String(reply[4]) };
  return {
    ...info,
    holders: Number(reply[4]),
    mode: reply[5] === 's' ? 'shared' : 'exclusive',
    permits: Number(reply[6]),
    slots: reply.slice(7).map(Number),
  };
}
