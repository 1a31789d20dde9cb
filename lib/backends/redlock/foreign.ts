import { LockBackendError } from '../../errors/lock.errors';
import type { NodeAnswer } from './quorum';

/** A node's refusal of a key holding something this module did not write. */
const FOREIGN = /^FOREIGN (\S+)/;

/**
 * The `LockBackendError` for a round in which a node refused the Redis key `name` because it
 * holds something this module did not write ("FOREIGN <type>"), naming the key, the type and
 * the node; undefined when none did.
 */
export function foreignError(
  answers: ReadonlyArray<NodeAnswer<unknown>>,
  name: string,
  backendName: string,
): LockBackendError | undefined {
  for (const answer of answers) {
    if (answer.ok) continue;
    const match = FOREIGN.exec(answer.error);
    if (!match) continue;
    return new LockBackendError(
      backendName,
      `the Redis key "${name}" on node ${answer.node.label} holds a ${match[1]} this module did ` +
        'not write: refusing to use or overwrite it (remove it, or use another key or keyPrefix)',
    );
  }
  return undefined;
}
