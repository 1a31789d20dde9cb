import { randomBytes } from 'node:crypto';

const TOKEN_HEX = 32;
/** Tokens drawn per call to the CSPRNG, hex-encoded in one go: per-token calls were ~5% of a Redis cycle. */
const POOL_TOKENS = 256;
let pool = '';
let offset = 0;

/**
 * A fresh owner token per acquisition: 128 random bits. Never one id per process, or two
 * requests of one process would both "own" the lock.
 */
export function newOwnerToken(): string {
  if (offset + TOKEN_HEX > pool.length) {
    pool = randomBytes((TOKEN_HEX / 2) * POOL_TOKENS).toString('hex');
    offset = 0;
  }
  const token = pool.slice(offset, offset + TOKEN_HEX);
  offset += TOKEN_HEX;
  return token;
}

/** Whether `token` carries a label after its random part (`<random>.<label>`). */
export function isLabelled(token: string): boolean {
  return token.length > TOKEN_HEX && token.charCodeAt(TOKEN_HEX) === 0x2e;
}
