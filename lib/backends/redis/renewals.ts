import type { GrantRequest } from '../../core/contract/lock-backend';
import { keySlot } from './port/key-slot';
import type { ScriptCall } from './port/redis-port';
import type { RedisStore } from './redis-store';
import { RENEW, RENEW_BATCH } from './scripts/renew';

/**
 * Renews a batch of leases, each only if its own token holds it (`LockBackend.extendMany`): one
 * script call per {@link RENEW_BATCH} leases (on a Cluster, per slot: a script's keys share
 * one), sent together in one batch (the port writes each node's calls at once). A call that
 * fails fails its leases only (an `Error` each); rejects when every lease failed. A lease whose
 * key now holds something this module did not write is no longer ours (`false`).
 */
export async function renewLeases(
  store: RedisStore,
  requests: readonly GrantRequest[],
): Promise<readonly (boolean | Error)[]> {
  if (requests.length === 0) return [];
  const locks = requests.map(({ key }) => store.keyspace.lockName(key));
  const parts: number[][] = [];
  if (store.cluster) {
    const bySlot = new Map<number, number[]>();
    locks.forEach((lock, i) => {
      const slot = keySlot(lock);
      const inSlot = bySlot.get(slot);
      if (inSlot) inSlot.push(i);
      else bySlot.set(slot, [i]);
    });
    for (const inSlot of bySlot.values()) parts.push(...chunks(inSlot));
  } else {
    parts.push(...chunks(requests.map((_, i) => i)));
  }
  const calls: ScriptCall[] = parts.map((part) => ({
    keys: part.map((i) => locks[i]),
    args: renewalArgs(requests, part),
  }));
  const results = new Array<boolean | Error>(requests.length);
  try {
    const replies = await store.batch(RENEW, calls);
    parts.forEach((part, j) => {
      const reply = replies[j];
      part.forEach((i, k) => {
        if (reply instanceof Error) results[i] = reply;
        else results[i] = Number((reply as unknown[])[k]) === 1;
      });
    });
  } catch (err) {
    const error = err instanceof Error ? err : new Error(String(err));
    results.fill(error);
  }
  if (results.every((r) => r instanceof Error)) throw results[0];
  return results;
}

/** `indices` cut into runs of at most {@link RENEW_BATCH}. */
function chunks(indices: readonly number[]): number[][] {
  const out: number[][] = [];
  for (let at = 0; at < indices.length; at += RENEW_BATCH) {
    out.push(indices.slice(at, at + RENEW_BATCH));
  }
  return out;
}

/**
 * A renewal call's ARGV: the tokens, then the ttl once when all share it (the usual case; a
 * hundred thousand ttls written out a tick were a visible share of its CPU), else one per key.
 */
function renewalArgs(
  requests: readonly GrantRequest[],
  part: readonly number[],
): (string | number)[] {
  const args: (string | number)[] = part.map((i) => requests[i].token);
  const ttl = requests[part[0]].ttlMs;
  if (part.every((i) => requests[i].ttlMs === ttl)) args.push(ttl);
  else for (const i of part) args.push(requests[i].ttlMs);
  return args;
}
