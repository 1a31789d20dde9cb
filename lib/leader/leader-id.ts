import { hostname } from 'node:os';
import { checkText, MAX_LEADER_ID } from './leader-label';

/** The module options leader election reads (the engine accepts them as known, never reads them). */
export const LEADER_OPTION_KEYS = ['leaderId'] as const;

/**
 * This instance's `LeaderService.id`: the module's `leaderId` option, else `<host name>:<pid>`
 * (`LockConfigError` naming `leaderId` for anything but a string of 1 to 128 characters).
 */
export function leaderIdOf(options: unknown): string {
  const given = (options as { leaderId?: unknown } | undefined)?.leaderId;
  if (given !== undefined) return checkText(given, 'leaderId', MAX_LEADER_ID);
  return `${hostname()}:${process.pid}`.slice(0, MAX_LEADER_ID);
}
