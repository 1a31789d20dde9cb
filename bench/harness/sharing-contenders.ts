import Redis from 'ioredis';
import { Semaphore } from 'redis-semaphore';
import type { LockOptions } from '../../lib';
import { startLocks } from './nest-locks';

/**
 * A lock that admits several holders of one key, as the sharing suites drive it: ours (counted
 * with `permits`, or shared reads beside exclusive writes) on a store, or a peer.
 */
export type SharingContender =
  | {
      kind: 'ours';
      store: 'redis' | 'memory';
      /** Holders at once (`permits`; 1: a mutex). */
      permits: number;
      /** Reads take the key `mode: 'shared'`; false: every request is exclusive. */
      sharedReads: boolean;
    }
  | { kind: 'redis-semaphore'; permits: number };

/** The key as a worker takes it: `write` says whether this request is a write (exclusive). */
export interface SharingLock {
  acquire(key: string, write: boolean): Promise<{ release(): Promise<unknown> }>;
  close(): Promise<void>;
}

/** Long enough never to give up under 16-way contention in a bench run. */
const WAIT_MS = 60_000;
const TTL_MS = 30_000;

/** Builds `contender` in this process, on the Redis at `redisUrl` where it uses Redis. */
export async function createSharingLock(
  contender: SharingContender,
  redisUrl: string,
): Promise<SharingLock> {
  if (contender.kind === 'redis-semaphore') {
    const client = new Redis(redisUrl);
    return {
      acquire: async (key) => {
        // Defaults (retryInterval 10 ms, lockTimeout 10 s, refresh) but the acquire timeout, as
        // the mutex peer of the contended suite.
        const semaphore = new Semaphore(client, key, contender.permits, {
          acquireTimeout: WAIT_MS,
        });
        await semaphore.acquire();
        return { release: () => semaphore.release() };
      },
      close: async () => void client.disconnect(),
    };
  }
  const app = await startLocks({
    backends: {
      store:
        contender.store === 'redis'
          ? { type: 'redis', url: redisUrl, startup: 'fail' }
          : { type: 'memory' },
    },
    defaults: { waitTimeout: WAIT_MS, ttl: TTL_MS },
  });
  // Options left out where they are the default, so the exclusive baseline is the plain mutex.
  const read: LockOptions = contender.sharedReads ? { mode: 'shared' } : {};
  const write: LockOptions = contender.permits > 1 ? { permits: contender.permits } : {};
  return {
    acquire: (key, isWrite) => app.locks.acquire(key, isWrite ? write : read),
    close: () => app.close(),
  };
}
