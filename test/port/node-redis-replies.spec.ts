/**
 * What a node-redis user may set on a client does not change the port's replies: RESP3 on
 * node-redis 5 (a map, INFO's verbatim string), a typeMapping that decodes strings as Buffers,
 * node-redis 4's callback API (legacyMode). Against the machine's Redis.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import * as redis5 from 'redis';
import * as redis4 from 'redis4';
import { portOf } from '../../lib/backends/redis/port/client-ports';
import { script, type RedisPort } from '../../lib/backends/redis/port/redis-port';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { within } from '../support/async';
import { exportsOf } from './families';

interface NodeRedisClient {
  connect(): Promise<unknown>;
  disconnect(): Promise<unknown>;
  sendCommand(args: string[]): Promise<unknown>;
}
interface NodeRedisLibrary {
  createClient(options: object): NodeRedisClient;
  RESP_TYPES: Record<string, number>;
}

const v5 = exportsOf<NodeRedisLibrary>(redis5, 'createClient');
const v4 = exportsOf<NodeRedisLibrary>(redis4, 'createClient');
const key = `port:replies:${process.pid}`;
const SHAPES = script(`return {1, 'two', false, {3, 'x', {}}, tonumber(ARGV[1]), KEYS[1]}`);

const opened: NodeRedisClient[] = [];
afterAll(async () => {
  await Promise.all(opened.map((c) => c.disconnect()));
});

async function connected(library: NodeRedisLibrary, options: object): Promise<RedisPort> {
  const client = library.createClient({ url: MACHINE_REDIS_URL, ...options });
  opened.push(client);
  await client.connect();
  return portOf(client)!;
}

describe('node-redis replies whatever the client options', () => {
  it('node-redis 5 with RESP: 3: script replies, a map, INFO, as under RESP2', async () => {
    const port = await connected(v5, { RESP: 3 });
    expect(await port.evalScript(SHAPES, [key], [5])).toEqual([
      1,
      'two',
      null,
      [3, 'x', []],
      5,
      key,
    ]);
    expect(await port.command(['CONFIG', 'GET', 'maxmemory-policy'])).toEqual([
      'maxmemory-policy',
      expect.any(String),
    ]);
    const info = await port.command(['INFO', 'server']);
    expect(typeof info).toBe('string');
    expect(info).toContain('uptime_in_seconds:');
  });

  it('a typeMapping of bulk strings to Buffers: strings still', async () => {
    const typeMapping = { [v5.RESP_TYPES.BLOB_STRING]: Buffer };
    const client = v5.createClient({ url: MACHINE_REDIS_URL, commandOptions: { typeMapping } });
    opened.push(client);
    await client.connect();
    await client.sendCommand(['SET', key, 'text']);
    expect(Buffer.isBuffer(await client.sendCommand(['GET', key]))).toBe(true); // the mapping works
    expect(await portOf(client)!.command(['GET', key])).toBe('text');
  });

  it('node-redis 4 in legacyMode: commands and a subscriber', async () => {
    const port = await connected(v4, { legacyMode: true });
    expect(await port.command(['PING'])).toBe('PONG');
    expect(await port.evalScript(SHAPES, [key], [4])).toEqual([
      1,
      'two',
      null,
      [3, 'x', []],
      4,
      key,
    ]);
    const sub = port.subscriber();
    try {
      const heard = new Promise<string>((resolve) => {
        void sub.subscribe(`${key}:channel`, resolve).then(() => {
          void port.command(['PUBLISH', `${key}:channel`, 'hello']);
        });
      });
      expect(await within(heard, 5_000, 'the message')).toBe('hello');
    } finally {
      await sub.close();
    }
  });
});
