import { MAX_TOKEN_LENGTH } from '../core/contract/lock-backend';
import { LockConfigError } from '../errors/lock.errors';
import { describe } from '../core/shared/options';
import type { LeaderInfo } from './leader.interfaces';

/** Longest leadership name, in characters. */
export const MAX_LEADER_NAME = 256;
/** Longest `value`, in characters. */
export const MAX_LEADER_VALUE = 256;
/** Longest leader id, in characters. */
export const MAX_LEADER_ID = 128;
/**
 * The namespace of leadership keys: the lock of name `n` is `<keyPrefix>` + this + `n`, apart
 * from the keys users lock by hand.
 */
const KEY_NAMESPACE = 'nestjs-distributed-lock:leader:';

/** The lock key of leadership `name`, validated (`LockConfigError` naming `field`). */
export function leaderKey(name: unknown, field = 'name'): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new LockConfigError(field, `must be a non-empty string, got ${describe(name)}`);
  }
  if (name.length > MAX_LEADER_NAME) {
    throw new LockConfigError(
      field,
      `must be at most ${MAX_LEADER_NAME} characters, got ${name.length}`,
    );
  }
  return KEY_NAMESPACE + name;
}

/** Checks a text option (`value`, `leaderId`): a string of 1 to `max` characters. */
export function checkText(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new LockConfigError(
      field,
      `must be a string of 1 to ${max} characters, got ${describe(value)}`,
    );
  }
  return value;
}

/**
 * The label a leader's owner token carries (`<random>.<label>`): its id and value, as
 * base64url JSON, so every backend stores it as it stores any token and `leader()` reads it
 * back from the holder's token.
 */
export function encodeLabel(id: string, value: string | undefined): string {
  const json = JSON.stringify(value === undefined ? { i: id } : { i: id, v: value });
  const label = Buffer.from(json, 'utf8').toString('base64url');
  // The token is 32 hex digits, a '.' and the label.
  if (label.length > MAX_TOKEN_LENGTH - 33) {
    throw new LockConfigError(
      'value',
      `with the leader id, takes ${label.length} characters once encoded; at most ` +
        `${MAX_TOKEN_LENGTH - 33} fit (use fewer non-ASCII characters)`,
    );
  }
  return label;
}

/** The id and value in a holder's owner token; `undefined` for a token with no leader label. */
export function decodeOwner(owner: string | undefined): Omit<LeaderInfo, 'term'> | undefined {
  const dot = owner?.indexOf('.') ?? -1;
  if (owner === undefined || dot < 0) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(owner.slice(dot + 1), 'base64url').toString());
    const { i, v } = parsed as { i?: unknown; v?: unknown };
    if (typeof i !== 'string') return undefined;
    return typeof v === 'string' ? { id: i, value: v } : { id: i };
  } catch {
    return undefined;
  }
}
