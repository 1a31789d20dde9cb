import {
  isNoScript,
  isReplyError,
  RedisReplyError,
  type RedisScript,
  type ScriptCall,
} from './redis-port';
import { isError, toError } from './port-errors';

/**
 * How a node-redis port sends one command: its words and the key that routes it on a Cluster.
 * Rejects with a {@link RedisReplyError} for a reply error (see {@link fromNodeRedis}).
 */
export type SendCommand = (args: string[], routeKey: string | undefined) => Promise<unknown>;

/**
 * node-redis 5 and 6 decode replies by a `typeMapping` (RESP type byte to JS type), which a user
 * may set on the client (bulk strings as Buffers...). These command options decode every reply
 * the port reads into its RESP2 shape whatever the client's mapping and protocol: strings as
 * strings, a RESP3 map as a flat array, a set as an array, a double or big number as its text.
 * node-redis 4 (RESP2 only) ignores them.
 */
export const RESP2_SHAPES: { readonly typeMapping: Readonly<Record<number, unknown>> } = {
  typeMapping: {
    36: String, // $ bulk string
    43: String, // + simple string
    61: String, // = verbatim string (INFO under RESP3)
    58: Number, // : integer
    44: String, // , double
    40: String, // ( big number
    126: Array, // ~ set
    37: Array, // % map
  },
};

/**
 * A node-redis reply error (`ErrorReply` in 4, its subclasses `SimpleError` and `BlobError` in 5
 * and 6, all named plain `Error`) as a {@link RedisReplyError} with the server's message; any
 * other error (the connection's, a closed client's) as it is.
 */
export function fromNodeRedis(err: unknown): unknown {
  if (!isError(err) || err instanceof RedisReplyError) return err;
  for (let proto: unknown = Object.getPrototypeOf(err); proto !== null;) {
    if ((proto as { constructor?: { name?: unknown } }).constructor?.name === 'ErrorReply') {
      return new RedisReplyError(err.message);
    }
    proto = Object.getPrototypeOf(proto);
  }
  return err;
}

/** `EVALSHA sha n keys... args...` (or `EVAL source ...`) as words: node-redis sends strings only. */
function scriptCommand(
  script: RedisScript,
  withSource: boolean,
  keys: readonly string[],
  args: readonly (string | number)[],
): string[] {
  return [
    withSource ? 'EVAL' : 'EVALSHA',
    withSource ? script.source : script.sha,
    String(keys.length),
    ...keys,
    ...args.map(String),
  ];
}

/** EVALSHA, then EVAL when the node answered NOSCRIPT; routed by `keys[0]`. */
export async function evalScriptWith(
  send: SendCommand,
  script: RedisScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await send(scriptCommand(script, false, keys, args), keys[0]);
  } catch (err) {
    if (!isNoScript(err)) throw err;
    return send(scriptCommand(script, true, keys, args), keys[0]);
  }
}

/**
 * Every call issued in the same tick, which node-redis writes to each node in one go (it flushes
 * its queue on the next turn of the event loop), EVALSHA first, then the calls a node answered
 * NOSCRIPT to again with EVAL. One result per call: its reply or its error. Rejects (with the
 * first error) only when no call got an answer from a server: the batch could not be sent.
 */
export async function evalBatchWith(
  send: SendCommand,
  script: RedisScript,
  calls: readonly ScriptCall[],
): Promise<unknown[]> {
  const round = (indices: readonly number[], withSource: boolean): Promise<unknown[]> =>
    Promise.all(
      indices.map((i) =>
        send(
          scriptCommand(script, withSource, calls[i].keys, calls[i].args),
          calls[i].keys[0],
        ).catch((err: unknown) => toError(err)),
      ),
    );
  const results = await round(
    calls.map((_, i) => i),
    false,
  );
  const unknown = results.flatMap((result, i) => (isNoScript(result) ? [i] : []));
  if (unknown.length > 0) {
    const again = await round(unknown, true);
    unknown.forEach((i, j) => (results[i] = again[j]));
  }
  if (results.length > 0 && results.every((r) => isError(r) && !isReplyError(r))) {
    throw results[0];
  }
  return results;
}
