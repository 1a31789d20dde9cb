import { LockConfigError } from '../../errors/lock.errors';

/**
 * The refusal of a request whose `permits` differ from those the key's holders and waiters
 * agreed on: admitting it under either count would let more in than one of them allows, so
 * every backend refuses it alike (field `permits`), never over-admits. `agreed`: the count the
 * key is held with, where the store tells it (a SQL session lock may only know it differs);
 * `mode`: the request's, where it is what disagrees (a reader beside counted holders).
 */
export function permitsDisagreement(
  key: string,
  agreed: number | undefined,
  asked: number,
  mode?: 'exclusive' | 'shared',
): LockConfigError {
  const held = agreed === undefined ? 'other permits' : `permits: ${agreed}`;
  const request = mode === undefined ? `${asked}` : `${asked} (mode '${mode}')`;
  return new LockConfigError(
    'permits',
    `"${key}" is held or awaited with ${held}, this request asks for ${request}: ` +
      'every holder and waiter of a key must ask the same permits',
  );
}
