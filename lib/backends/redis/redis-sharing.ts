import type { GrantRequest, StoreLockInfo } from '../../core/contract/lock-backend';

/**
 * Whether a request is a plain mutex (`exclusive`, one permit): those keep the mutex's string
 * layout and scripts; anything else is a shared or counted request (see
 * `redis-sharing-scripts.ts`).
 */
export function isMutex({ mode, permits }: Pick<GrantRequest, 'mode' | 'permits'>): boolean {
  return (mode === undefined || mode === 'exclusive') && (permits === undefined || permits === 1);
}

/** The mode letter the sharing scripts keep: `s` shared, `x` exclusive. */
export function modeLetter({ mode }: Pick<GrantRequest, 'mode'>): 's' | 'x' {
  return mode === 'shared' ? 's' : 'x';
}

/**
 * A waiter's token as its queue member carries it: tagged with what it asks (`<token>|s`
 * shared, `<token>|p<n>` one of n permits, the bare token for a mutex), so a script admitting
 * the queue's head knows whether it fits beside the holders, and a mutex script's hand-over
 * does not make the real token the owner of a mutex.
 */
export function taggedToken(request: GrantRequest): string {
  if (isMutex(request)) return request.token;
  return request.mode === 'shared'
    ? `${request.token}|s`
    : `${request.token}|p${request.permits ?? 1}`;
}

/**
 * Whether a script failed on a key of the other layout: a mutex script (`GET`) meeting a hash of
 * shared or counted holders. The backend then reruns the call with the sharing script.
 */
export function isWrongType(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('WRONGTYPE');
}

/**
 * `StoreLockInfo` from an inspect reply: the mutex script's `{held, fence, pttl, waiting}`
 * (a plain mutex string, or nothing), or the sharing script's, which goes on with
 * `holders, mode, permits, slot...` (a key of either layout).
 */
export function inspectInfo(reply: readonly unknown[]): StoreLockInfo {
  const [held, fence, left, waiting] = reply.slice(0, 4).map(Number);
  const info: StoreLockInfo = {
    held: held === 1,
    fence,
    // -1: a key without expiry (not one of ours); report no expiry rather than -1.
    remainingMs: held === 1 && left >= 0 ? left : undefined,
    waiting,
    holders: held === 1 ? 1 : 0,
  };
  if (reply.length <= 5) return reply.length === 5 ? { ...info, holders: Number(reply[4]) } : info;
  return {
    ...info,
    holders: Number(reply[4]),
    mode: reply[5] === 's' ? 'shared' : 'exclusive',
    permits: Number(reply[6]),
    slots: reply.slice(7).map(Number),
  };
}
