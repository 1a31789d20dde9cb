import { randomBytes } from 'node:crypto';

/**
 * A fresh owner token per acquisition: 128 random bits. Never one id per process, or two
 * requests of one process would both "own" the lock.
 */
export function newOwnerToken(): string {
  return randomBytes(16).toString('hex');
}
