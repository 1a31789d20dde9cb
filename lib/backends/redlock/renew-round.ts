import type { GrantRequest } from '../../core/contract/lock-backend';
import type { ScriptCall } from '../redis/port/redis-port';
import type { RedisKeyspace } from '../redis/redis-keys';
import { RENEW_BATCH } from '../redis/scripts/renew';
import { fenceOf } from './lock-value';
import type { NodeAnswer, Quorum } from './quorum';
import type { QuorumNode } from './quorum-node';
import { RENEW_COPIES, RESTORE_COPIES } from './redlock-scripts';

/** One node's answer for one lease: `[code, value]` (see `RENEW_COPIES`), or its call's error. */
type CopyAnswer = [number, string] | Error;

/**
 * Renews every node's copies of a batch of leases, one script call per node (per
 * {@link RENEW_BATCH} leases, all in one batch), the nodes in parallel. A lease counts as
 * renewed when a quorum renewed it, as lost (`false`) when a quorum answered and fewer renewed,
 * else as failed (a `LockBackendError` saying what each node answered; a node that failed counts
 * against the quorum). Then puts back the renewed leases' missing copies (a node restarted empty,
 * a copy expired early): otherwise the lock would rest on fewer nodes at every restart, and one
 * more node down would lose it with a quorum up. Only after a quorum renewed, so a lock freed
 * everywhere (`forceRelease`) is never put back.
 */
export async function renewRound(
  quorum: Quorum,
  keyspace: RedisKeyspace,
  requests: readonly GrantRequest[],
): Promise<readonly (boolean | Error)[]> {
  if (requests.length === 0) return [];
  quorum.require('extend');
  const locks = requests.map(({ key }) => keyspace.lockName(key));
  const calls: ScriptCall[] = [];
  for (let at = 0; at < requests.length; at += RENEW_BATCH) {
    const part = requests.slice(at, at + RENEW_BATCH);
    calls.push({
      keys: locks.slice(at, at + RENEW_BATCH),
      args: [...part.map((r) => r.token), ...part.map((r) => r.ttlMs)],
    });
  }
  const answers = await quorum.onEvery(async (node) =>
    perLease(await node.batch(RENEW_COPIES, calls), calls),
  );
  const restores = new Map<QuorumNode, Array<{ lock: string; value: string; ttlMs: number }>>();
  const results = requests.map((request, i): boolean | Error => {
    const perNode = answers.map((answer): NodeAnswer<[number, string]> => {
      if (!answer.ok) return answer;
      const value = answer.value[i];
      return value instanceof Error
        ? quorum.failed(answer.node, value)
        : { node: answer.node, ok: true, value };
    });
    const renewed = perNode.flatMap((a) => (a.ok && a.value[0] === 1 ? [a.value[1]] : []));
    if (renewed.length >= quorum.size) {
      // A tagged copy's value carries the holder's fence (what inspect reports): prefer it.
      const value = renewed.find((v) => fenceOf(v) !== undefined) ?? renewed[0];
      for (const a of perNode) {
        if (!a.ok || a.value[0] !== 0) continue;
        const copies = restores.get(a.node) ?? [];
        copies.push({ lock: locks[i], value, ttlMs: request.ttlMs });
        restores.set(a.node, copies);
      }
      return true;
    }
    // A quorum answered and it is not ours there: lost. Fewer answered: an outage.
    if (quorum.answered(perNode) >= quorum.size) return false;
    return quorum.noQuorum('extend', perNode);
  });
  await Promise.all(
    [...restores].map(([node, copies]) =>
      quorum.onNodes([node], (n) =>
        n.run(
          RESTORE_COPIES,
          copies.map((c) => c.lock),
          [...copies.map((c) => c.value), ...copies.map((c) => c.ttlMs)],
        ),
      ),
    ),
  );
  if (results.every((r) => r instanceof Error)) throw results[0];
  return results;
}

/** A node's batch replies as one answer per lease, in request order. */
function perLease(replies: readonly unknown[], calls: readonly ScriptCall[]): CopyAnswer[] {
  return replies.flatMap((reply, j) =>
    calls[j].keys.map((_, k): CopyAnswer => {
      if (reply instanceof Error) return reply;
      return [Number((reply as unknown[])[2 * k]), String((reply as unknown[])[2 * k + 1])];
    }),
  );
}
