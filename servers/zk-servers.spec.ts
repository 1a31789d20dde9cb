import { afterAll, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { listensOn } from './child-processes';
import { eventually, isRunning, leftBehindByChildProcess } from './harness-checks';
import { startTcpProxy } from './tcp-proxy';
import {
  startZkEnsemble,
  startZkStandalone,
  stopAllZk,
  zkFourLetter,
  type ZkNode,
} from './zk-servers';

afterAll(stopAllZk);

const refused = { code: 'ECONNREFUSED' };
const timedOut = { code: 'ETIMEDOUT' };

/** Expects the node's JVM to be gone, its dir removed and its client port closed. */
async function expectGone(node: ZkNode, pid: number): Promise<void> {
  expect(node.pid()).toBeUndefined();
  expect(isRunning(pid)).toBe(false);
  expect(existsSync(node.dir)).toBe(false);
  await expect(zkFourLetter(node.clientPort, 'ruok')).rejects.toMatchObject(refused);
}

describe('zk-servers test harness', () => {
  it('starts a standalone server that answers ruok and srvr (Mode: standalone)', async () => {
    const node = await startZkStandalone();
    const pid = node.pid() as number;
    expect(pid).toEqual(expect.any(Number));
    expect(node.id).toBe(0);
    expect(node.connectString).toBe(`127.0.0.1:${node.clientPort}`);
    expect(listensOn(pid, node.clientPort)).toBe(true);

    expect(await zkFourLetter(node.clientPort, 'ruok')).toBe('imok');
    const srvr = await zkFourLetter(node.clientPort, 'srvr');
    expect(srvr).toMatch(/^Zookeeper version: 3\.8\./);
    expect(srvr).toContain('Mode: standalone');
    expect(await node.mode()).toBe('standalone');
    // The other whitelisted words answer too.
    expect(await zkFourLetter(node.clientPort, 'mntr')).toContain('zk_server_state\tstandalone');
    expect(await zkFourLetter(node.clientPort, 'stat')).toContain('Mode: standalone');
    expect(await zkFourLetter(node.clientPort, 'cons')).toContain('127.0.0.1');

    const cfg = readFileSync(join(node.dir, 'zoo.cfg'), 'utf8');
    expect(cfg).toContain('tickTime=500\n');
    expect(cfg).toContain('admin.enableServer=false\n');
    expect(cfg).not.toContain('server.1=');
    expect(readFileSync(join(node.dir, 'zookeeper.log'), 'utf8')).toContain(
      'minSessionTimeout 1000 ms maxSessionTimeout 60000 ms',
    );

    await node.destroy();
    await expectGone(node, pid);
  });

  it('pause() stops all answers, resume() restores them; stop() then start() keeps port and dir', async () => {
    const node = await startZkStandalone({ tickTime: 250 });
    const firstPid = node.pid() as number;

    await node.pause();
    await expect(zkFourLetter(node.clientPort, 'ruok', 500)).rejects.toMatchObject(timedOut);
    expect(await node.mode()).toBe('down');
    expect(isRunning(firstPid)).toBe(true);
    node.resume();
    expect(await zkFourLetter(node.clientPort, 'ruok')).toBe('imok');

    await node.pause();
    const stopping = Date.now();
    await node.stop(); // SIGTERM reaches a paused JVM too (stop() resumes it)
    expect(Date.now() - stopping).toBeLessThan(4_000);
    expect(node.pid()).toBeUndefined();
    expect(isRunning(firstPid)).toBe(false);
    expect(await node.mode()).toBe('down');
    await expect(zkFourLetter(node.clientPort, 'ruok')).rejects.toMatchObject(refused);
    expect(existsSync(join(node.dir, 'data', 'version-2'))).toBe(true);

    await node.start();
    expect(node.pid()).not.toBe(firstPid);
    expect(await node.mode()).toBe('standalone');
    expect(await zkFourLetter(node.clientPort, 'srvr')).toContain('Mode: standalone');
    await node.start(); // no-op while running

    // Four-letter words go through the fault-injection proxy like any client traffic.
    const proxy = await startTcpProxy(node.clientPort);
    try {
      expect(await zkFourLetter(proxy.port, 'ruok')).toBe('imok');
      proxy.blackhole(true);
      await expect(zkFourLetter(proxy.port, 'ruok', 300)).rejects.toMatchObject(timedOut);
      proxy.blackhole(false);
      expect(await zkFourLetter(proxy.port, 'ruok')).toBe('imok');
    } finally {
      await proxy.close();
    }

    const pid = node.pid() as number;
    await node.destroy();
    await expectGone(node, pid);
  });

  it('starts a 3-node ensemble with exactly one leader, re-elects when the leader dies', async () => {
    const started = Date.now();
    const ensemble = await startZkEnsemble(3);
    const startMs = Date.now() - started;
    expect(ensemble.nodes.map((n) => n.id)).toEqual([1, 2, 3]);
    expect(ensemble.connectString).toBe(
      ensemble.nodes.map((n) => `127.0.0.1:${n.clientPort}`).join(','),
    );
    const modes = await Promise.all(ensemble.nodes.map((n) => n.mode()));
    expect(modes.filter((m) => m === 'leader')).toHaveLength(1);
    expect(modes.filter((m) => m === 'follower')).toHaveLength(2);
    for (const node of ensemble.nodes) {
      expect(readFileSync(join(node.dir, 'data', 'myid'), 'utf8').trim()).toBe(String(node.id));
      expect(await zkFourLetter(node.clientPort, 'ruok')).toBe('imok');
    }

    const old = await ensemble.leader();
    expect(await old.mode()).toBe('leader');
    const oldPid = old.pid() as number;
    await old.stop('SIGKILL');
    const killed = Date.now();
    const next = await ensemble.leader(10_000);
    const electionMs = Date.now() - killed;
    expect(next).not.toBe(old);
    expect(electionMs).toBeLessThan(5_000);
    expect(isRunning(oldPid)).toBe(false);
    expect(existsSync(old.dir)).toBe(true); // stop() keeps the data for start()

    await old.start(); // rejoins on its ports with its data, as a follower
    expect(await old.mode()).toBe('follower');
    expect(await ensemble.leader()).toBe(next);
    console.log(
      `ZooKeeper ensemble of 3 serving in ${startMs} ms; new leader ${electionMs} ms after ` +
        'the old one was killed',
    );

    const pids = ensemble.nodes.map((n) => n.pid() as number);
    await ensemble.stop();
    for (const [i, node] of ensemble.nodes.entries()) await expectGone(node, pids[i]);
  });

  it('stopAllZk() stops every node still running and removes the dirs', async () => {
    const ensemble = await startZkEnsemble(2);
    const pids = ensemble.nodes.map((n) => n.pid() as number);
    await stopAllZk();
    for (const [i, node] of ensemble.nodes.entries()) await expectGone(node, pids[i]);
    await expect(ensemble.nodes[0].start()).rejects.toThrow(/destroyed/);
  });

  it('kills ZooKeeper nodes left running when the process is SIGKILLed', async () => {
    const { pid, dir } = await leftBehindByChildProcess(
      'zk-servers',
      'startZkStandalone',
      'sigkill',
    );
    expect(await eventually(() => !isRunning(pid) && !existsSync(dir), 5_000)).toBe(true);
  });
});
