/**
 * The scale suite counts a Redis client's store calls on the wire: the counter must see each
 * command exactly once however the stream is cut into chunks, whatever its arguments contain.
 */
import { describe, expect, it } from '@jest/globals';
import { RespRequestCounter } from '../../bench/harness/resp-request-counter';

/** A command as a client encodes it: an array of bulk strings. */
function encode(...args: string[]): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const arg of args) parts.push(`$${Buffer.byteLength(arg)}\r\n${arg}\r\n`);
  return Buffer.from(parts.join(''));
}

const STREAM = Buffer.concat([
  encode('EVALSHA', 'abc', '1', '{tag}k', 'token', '3000'),
  // Arguments that look like RESP headers or contain line breaks must not be counted.
  encode('EVAL', "redis.call('get', KEYS[1])\r\n*3\r\n$1\r\n", '0'),
  encode('SET', '*2', '$5\r\n'),
  encode('PING'),
  Buffer.from('PING\r\n'), // an inline command
  encode('GET', 'ü-key'), // bulk lengths are bytes, not characters
]);

describe('RespRequestCounter', () => {
  it('counts each command of a stream once', () => {
    const counter = new RespRequestCounter();
    counter.push(STREAM);
    expect(counter.count).toBe(6);
  });

  it('counts the same whatever the chunk boundaries', () => {
    for (const size of [1, 2, 3, 7, 13]) {
      const counter = new RespRequestCounter();
      for (let i = 0; i < STREAM.length; i += size) counter.push(STREAM.subarray(i, i + size));
      expect({ size, count: counter.count }).toEqual({ size, count: 6 });
    }
  });

  it('counts a command only once it is complete', () => {
    const counter = new RespRequestCounter();
    const command = encode('EVALSHA', 'abc', '0');
    counter.push(command.subarray(0, command.length - 1));
    expect(counter.count).toBe(0);
    counter.push(command.subarray(command.length - 1));
    expect(counter.count).toBe(1);
  });
});
