import { LockConfigError } from '../../errors/lock.errors';

/**
 * The refusal of a request whose `permits` differ from those the key's holders and waiters
 * agreed on: admitting it under either count would let more in than one of them allows, so
 * every backend refuses it alike (field `permits`), never over-admits.
 */
export function permitsDisagreement(key: string, agreed: number, asked: number): LockConfigError {
  return new LockConfigError(
    'permits',
    `"${key}" is held or awaited with permits: ${agreed}, this request asks for ` +
      `${asked}: every holder and waiter of a key must ask the same permits`,
  );
}
