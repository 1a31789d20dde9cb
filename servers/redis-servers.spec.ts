import { afterAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { eventually, isRunning, leftBehindByChildProcess } from './harness-checks';
import {
  findFreePort,
  redisCommand,
  startRedisCluster,
  startRedisNode,
  startRedisNodes,
  stopAll,
} from './redis-servers';

afterAll(stopAll);

const refused = { code: 'ECONNREFUSED' };

describe('redis-servers test harness', () => {
  it('finds a free port', async () => {
    const port = await findFreePort();
    expect(port).toBeGreaterThan(1024);
    await expect(redisCommand(port, 'PING')).rejects.toMatchObject(refused);
  });

  it('starts a node without persistence that answers PING over a raw socket', async () => {
    const node = await startRedisNode();
    expect(node.host).toBe('127.0.0.1');
    expect(node.url).toBe(`redis://127.0.0.1:${node.port}`);
    expect(node.pid()).toEqual(expect.any(Number));
    expect(await redisCommand(node.port, 'PING')).toBe('+PONG\r\n');
    expect(await redisCommand(node.port, 'CONFIG', 'GET', 'save')).toBe(
      '*2\r\n$4\r\nsave\r\n$0\r\n\r\n',
    );
    expect(await redisCommand(node.port, 'CONFIG', 'GET', 'appendonly')).toBe(
      '*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n',
    );
    await node.stop();
  });

  it('restart keeps the port but empties the data', async () => {
    const node = await startRedisNode();
    const firstPid = node.pid();
    expect(await redisCommand(node.port, 'SET', 'greeting', 'héllo')).toBe('+OK\r\n');
    expect(await redisCommand(node.port, 'GET', 'greeting')).toBe('$6\r\nhéllo\r\n');

    await node.restart();

    expect(node.pid()).toEqual(expect.any(Number));
    expect(node.pid()).not.toBe(firstPid);
    expect(existsSync(node.dir)).toBe(true);
    expect(await redisCommand(node.port, 'GET', 'greeting')).toBe('$-1\r\n');
    expect(await redisCommand(node.port, 'DBSIZE')).toBe(':0\r\n');
    await node.stop();
  });

  it('stop (SIGTERM or SIGKILL) makes the port refuse connections and removes the dir', async () => {
    const [gentle, brutal] = await startRedisNodes(2);
    expect(gentle.port).not.toBe(brutal.port);
    const brutalPid = brutal.pid() as number;

    await gentle.stop();
    await brutal.stop('SIGKILL');

    for (const node of [gentle, brutal]) {
      expect(node.pid()).toBeUndefined();
      expect(existsSync(node.dir)).toBe(false);
      await expect(redisCommand(node.port, 'PING')).rejects.toMatchObject(refused);
    }
    expect(isRunning(brutalPid)).toBe(false);
    await gentle.stop(); // idempotent
  });

  it('restart after stop starts the node again on its port', async () => {
    const node = await startRedisNode();
    await node.stop();
    await node.restart();
    expect(await redisCommand(node.port, 'PING')).toBe('+PONG\r\n');
    await node.stop();
  });

  it('stopAll stops every node still running', async () => {
    const nodes = await startRedisNodes(3);
    expect(new Set(nodes.map((n) => n.port)).size).toBe(3);
    await stopAll();
    for (const node of nodes) {
      await expect(redisCommand(node.port, 'PING')).rejects.toMatchObject(refused);
      expect(existsSync(node.dir)).toBe(false);
    }
  });

  it('rejects with the log tail when redis-server cannot start', async () => {
    await expect(startRedisNode({ extraArgs: ['--no-such-directive', 'x'] })).rejects.toThrow(
      /failed to start \(exit code 1\)[\s\S]*no-such-directive/,
    );
  });

  it('starts a 3-master cluster with all slots assigned, and stops it', async () => {
    const cluster = await startRedisCluster();
    expect(cluster.nodes).toHaveLength(3);
    expect(cluster.seeds).toEqual(cluster.nodes.map((n) => `redis://127.0.0.1:${n.port}`));

    for (const node of cluster.nodes) {
      const info = await redisCommand(node.port, 'CLUSTER', 'INFO');
      expect(info).toContain('cluster_state:ok\r\n');
      expect(info).toContain('cluster_slots_assigned:16384\r\n');
      expect(info).toContain('cluster_size:3\r\n');
      expect(info).toContain('cluster_known_nodes:3\r\n');
    }
    // CLUSTER SLOTS: one range per master, each served by a different node.
    const slots = await redisCommand(cluster.nodes[0].port, 'CLUSTER', 'SLOTS');
    expect(slots.startsWith('*3\r\n')).toBe(true);
    for (const node of cluster.nodes) expect(slots).toContain(`\r\n:${node.port}\r\n`);
    const nodesReply = await redisCommand(cluster.nodes[0].port, 'CLUSTER', 'NODES');
    expect(nodesReply.match(/[ ,]master /g)).toHaveLength(3);
    // A key is served by its slot's owner; the others redirect.
    const replies = await Promise.all(
      cluster.nodes.map((n) => redisCommand(n.port, 'SET', 'k', 'v')),
    );
    expect(replies.filter((r) => r === '+OK\r\n')).toHaveLength(1);
    expect(replies.filter((r) => r.startsWith('-MOVED '))).toHaveLength(2);

    await cluster.stop();
    for (const node of cluster.nodes) {
      await expect(redisCommand(node.port, 'PING')).rejects.toMatchObject(refused);
      expect(existsSync(node.dir)).toBe(false);
    }
  });

  it('kills nodes left running when the process exits', async () => {
    const { pid, dir } = await leftBehindByChildProcess('redis-servers', 'startRedisNode', 'exit');
    expect(await eventually(() => !isRunning(pid) && !existsSync(dir), 3_000)).toBe(true);
  });

  it('kills nodes left running when the process is SIGKILLed', async () => {
    const { pid, dir } = await leftBehindByChildProcess(
      'redis-servers',
      'startRedisNode',
      'sigkill',
    );
    expect(await eventually(() => !isRunning(pid) && !existsSync(dir), 3_000)).toBe(true);
  });
});
