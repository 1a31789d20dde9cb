import type { StoreLockInfo } from '../../core/contract/lock-backend';
import type { RedisLockNames } from '../redis/redis-keys';
import { foreignError } from './foreign';
import { fenceOf, tokenOf } from './lock-value';
import type { Quorum } from './quorum';
import { DELETE_COPY, INSPECT_COPY, UNLOCK } from './redlock-scripts';

/**
 * Deletes our copy on every node: `true` when a quorum of copies were ours, `false` when a
 * quorum answered and fewer were (it expired or was taken: never another holder's copy), else a
 * `LockBackendError` saying what each node answered.
 */
export async function releaseRound(
  quorum: Quorum,
  names: RedisLockNames,
  token: string,
  backendName: string,
): Promise<boolean> {
  quorum.require('release');
  const answers = await quorum.onEvery(async (node) =>
    Number(await node.run(UNLOCK, [names.lock], [token])),
  );
  const foreign = foreignError(answers, names.lock, backendName);
  if (foreign) throw foreign;
  if (answers.filter((a) => a.ok && a.value === 1).length >= quorum.size) return true;
  if (quorum.answered(answers) >= quorum.size) return false;
  throw quorum.noQuorum('release', answers);
}

/**
 * Held when a quorum of nodes hold the same token. `fence`: the holder's, from its tagged copies
 * (else the largest counter among the nodes that answered: the holder's, unless a grant failed
 * half-way on some node since, then a little higher, never lower); `remainingMs`: until fewer
 * than a quorum of copies remain; `owner`: the holder's token. No queue, so no `waiting`.
 */
export async function inspectRound(
  quorum: Quorum,
  names: RedisLockNames,
  backendName: string,
): Promise<StoreLockInfo> {
  const answers = await quorum.onEvery(
    async (node) => (await node.fenced(INSPECT_COPY, names, false, [])) as [string, number, number],
  );
  const foreign = foreignError(answers, names.lock, backendName);
  if (foreign) throw foreign;
  const views = answers.flatMap((a) => (a.ok ? [a.value] : []));
  if (views.length < quorum.size) throw quorum.noQuorum('inspect', answers);
  const holder = quorum.holder(views.map(([value]) => tokenOf(String(value))));
  const last = Math.max(...views.map(([, , counter]) => Number(counter)));
  if (holder === undefined) return { held: false, fence: last, holders: 0 };
  const copies = views.filter(([value]) => tokenOf(String(value)) === holder);
  const fences = copies.flatMap(([value]) => fenceOf(String(value)) ?? []);
  const fence = fences.length > 0 ? Math.max(...fences) : last;
  // Copies expire one by one: the lock ends when the quorum-th longest-lived copy does.
  const lives = copies.map(([, pttl]) => Number(pttl)).sort((a, b) => b - a);
  return {
    held: true,
    fence,
    remainingMs: Math.max(0, lives[quorum.size - 1]),
    holders: 1,
    owner: holder,
  };
}

/**
 * Deletes the key's copy on every node, whoever holds it; `true` when a quorum held it. The
 * holder's next renewal finds no copy to renew (and puts none back), so it fails.
 */
export async function forceReleaseRound(
  quorum: Quorum,
  names: RedisLockNames,
  backendName: string,
): Promise<boolean> {
  const answers = await quorum.onEvery(async (node) =>
    String(await node.run(DELETE_COPY, [names.lock], [])),
  );
  const foreign = foreignError(answers, names.lock, backendName);
  if (foreign) throw foreign;
  if (quorum.answered(answers) < quorum.size) throw quorum.noQuorum('forceRelease', answers);
  return quorum.holder(answers.flatMap((a) => (a.ok ? [tokenOf(a.value)] : []))) !== undefined;
}
