/**
 * Helpers of the fence footprint specs (single Redis, Cluster, Redlock): lock-and-release
 * cycles straight on a backend, the module's keys left on a node, EVALSHA counts.
 */
import { randomUUID } from 'node:crypto';
import { expect } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { LockBackend } from '../../lib/core/contract/lock-backend';
import { redisLockNames } from './redis-names';

/** A fresh owner token (32 hex digits, as the engine makes them). */
export const ownerToken = (): string => randomUUID().replaceAll('-', '');

/**
 * Takes and releases `key` `rounds` times, locking and releasing a growing run of `mates` (keys
 * sharing its bucket) in between: the key's own fences in order, and every fence handed out.
 */
export async function fencesWithMatesBetween(
  backend: LockBackend,
  key: string,
  mates: readonly string[],
  rounds: number,
): Promise<{ mine: number[]; all: number[] }> {
  const mine: number[] = [];
  const all: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const token = ownerToken();
    const grant = await backend.tryAcquire({ key, token, ttlMs: 10_000 });
    expect(grant).not.toBeNull();
    mine.push(grant!.fence!);
    all.push(grant!.fence!);
    await backend.release(key, token);
    const fences = await lockAndRelease(backend, mates.slice(0, 1 + (round % mates.length)), 5);
    all.push(...fences.values());
  }
  return { mine, all };
}

/** Locks and releases each key once (`parallel` at a time); the fences granted, by key. */
export async function lockAndRelease(
  backend: LockBackend,
  keys: readonly string[],
  parallel = 50,
): Promise<Map<string, number>> {
  const fences = new Map<string, number>();
  for (let at = 0; at < keys.length; at += parallel) {
    await Promise.all(
      keys.slice(at, at + parallel).map(async (key) => {
        const token = ownerToken();
        const grant = await backend.tryAcquire({ key, token, ttlMs: 10_000 });
        expect(grant).not.toBeNull();
        fences.set(key, grant!.fence!);
        expect(await backend.release(key, token)).toBe(true);
      }),
    );
  }
  return fences;
}

/** Every key on a node. */
export async function allKeys(redis: Redis): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'COUNT', 1_000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/** What a node holds of the module's: fence counters, and the rest. */
export interface NodeFootprint {
  counters: string[];
  /** Anything else (a lock, a queue), with its PTTL. */
  others: Array<{ key: string; pttl: number }>;
}

/** Sorts a node's keys into counters (`<prefix>{T}nestjs-distributed-lock:fence`) and the rest. */
export async function footprint(redis: Redis, prefix = ''): Promise<NodeFootprint> {
  const result: NodeFootprint = { counters: [], others: [] };
  const counter = new RegExp(`^${escape(prefix)}\\{[0-9a-z]+\\}nestjs-distributed-lock:fence$`);
  for (const key of await allKeys(redis)) {
    if (counter.test(key)) result.counters.push(key);
    else result.others.push({ key, pttl: await redis.pttl(key) });
  }
  return result;
}

/**
 * Keys whose lock keys share a fence bucket with `of`'s: `count` of them, `prefix` + n, by
 * search (`buckets` null: the same hash slot, as on a Cluster).
 */
export function bucketMates(
  of: string,
  prefix: string,
  count: number,
  buckets: number | null,
): string[] {
  const bucket = (key: string): number => {
    const slot = redisLockNames('', key).slot;
    return buckets === null ? slot : slot % buckets;
  };
  const target = bucket(of);
  const mates: string[] = [];
  for (let n = 0; mates.length < count; n++) {
    if (`${prefix}${n}` !== of && bucket(`${prefix}${n}`) === target) mates.push(`${prefix}${n}`);
  }
  return mates;
}

/** EVALSHA calls a node has served so far (INFO commandstats). */
export async function evalshaCalls(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

/** `text` with the characters a regular expression gives meaning to escaped. */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
