import { types } from 'node:util';

/** An Error, from whichever realm made it (Node's own errors come from its main realm). */
export function isError(value: unknown): value is Error {
  return value instanceof Error || types.isNativeError(value);
}

/** `err` as an Error (a thrown non-Error wrapped, its text as the message). */
export function toError(err: unknown): Error {
  return isError(err) ? err : new Error(String(err));
}
