import type { LockGrant } from '../../core/contract/lock-backend';
import { monotonicNow } from '../../core/shared/clock';
import type { RedisLockNames } from '../redis/redis-keys';
import type { Quorum } from './quorum';
import type { QuorumNode } from './quorum-node';
import { LOCK, RAISE_FENCE, UNLOCK } from './redlock-scripts';
import { foreignError } from './foreign';

/** What a grant needs besides the quorum: the lease and how long it can be trusted. */
export interface GrantAsk {
  readonly names: RedisLockNames;
  readonly token: string;
  readonly ttlMs: number;
  /** The ttl less the drift allowance (`RedlockLockBackend.leaseValidity`). */
  readonly validityMs: number;
  /** The backend's name, for errors. */
  readonly backendName: string;
}

/**
 * One Redlock acquisition in two rounds.
 *
 * A node that restarted less than a lease ago may have forgotten a copy it held: its vote does
 * not count (see `RestartGuard`), so a lock resting on it and one other node cannot be granted
 * again to someone else meanwhile.
 *
 * The lock round sets the bare token with `SET NX PX` on every node and, where it took, draws the
 * key's fence bucket counter (INCR). Short of a quorum of grants it gives its copies back and is
 * busy (`null`), or fails when fewer than a quorum answered at all.
 *
 * The fencing round raises every node's bucket to the largest draw (tagging its copy with it) and
 * counts the grant only once a quorum confirmed. Any later grant's draws come from a quorum that
 * intersects this one, and on the common node the bucket is at least this fence, so its fence is
 * higher (other keys of the bucket only raise it further). Safe as long as nodes keep their data
 * for as long as a lease (see the restart guard); a node restarted empty could lower it.
 *
 * A grant whose validity (ttl less drift, from when the lock round was sent) ran out during the
 * rounds is given back: busy.
 */
export async function grantRound(quorum: Quorum, ask: GrantAsk): Promise<LockGrant | null> {
  const { names, token, ttlMs } = ask;
  quorum.require('acquire');
  const trusted = await trustedNodes(quorum, ttlMs);
  const sentAt = monotonicNow();
  const locked = await quorum.onEvery(
    async (node) => (await node.fenced(LOCK, names, false, [token, ttlMs])) as [number, number],
  );
  const granted = locked.flatMap((a) => (a.ok && Number(a.value[0]) === 1 ? [a] : []));
  // Every draw raises the fence (a restarted node's lowers nothing), but only the votes of nodes
  // up for longer than a lease make the quorum.
  const draws = granted.map((a) => Number(a.value[1]));
  const votes = granted.filter((a) => trusted.has(a.node)).length;
  const foreign = foreignError(locked, names.lock, ask.backendName);
  if (votes < quorum.size || foreign) {
    await giveBack(quorum, names, token);
    if (foreign) throw foreign;
    if (quorum.answered(locked) < quorum.size) throw quorum.noQuorum('acquire', locked);
    return null;
  }
  const fence = Math.max(...draws);
  const raised = await quorum.onEvery((node) =>
    node.fenced(RAISE_FENCE, names, true, [fence, token]),
  );
  if (quorum.answered(raised) < quorum.size) {
    await giveBack(quorum, names, token);
    throw quorum.noQuorum('acquire (fencing round)', raised);
  }
  if (monotonicNow() - sentAt >= ask.validityMs) {
    await giveBack(quorum, names, token);
    return null;
  }
  return { fence, grantedAt: sentAt };
}

/**
 * The nodes whose vote counts: up for longer than any lease they could have granted (their
 * uptime read first where it is not known; a node that cannot tell within the round's bound does
 * not count).
 */
async function trustedNodes(quorum: Quorum, ttlMs: number): Promise<Set<QuorumNode>> {
  const trusted = new Set<QuorumNode>();
  await quorum.onEvery(async (node) => {
    node.guard.noteTtl(ttlMs);
    if (node.guard.trustedNow() || (await node.guard.untilTrusted(Infinity)) <= 0) {
      trusted.add(node);
    }
  });
  return trusted;
}

/** Deletes our copies on every node (those whose answer was lost too), whatever they answer. */
async function giveBack(quorum: Quorum, names: RedisLockNames, token: string): Promise<void> {
  await quorum.onEvery((node) => node.run(UNLOCK, [names.lock], [token]));
}
