import { randomUUID } from 'node:crypto';
import { MACHINE_REDIS_URL } from '../../servers/redis-servers';
import { startZkStandalone, stopAllZk } from '../../servers/zk-servers';
import { handoffFor, runHandoffs } from '../harness/contended';
import { contendedChart, contendedTable } from '../harness/contended-table';
import { cycleTable } from '../harness/cycle-table';
import { connectZk, createContender, zkCalls, type ContenderName } from '../harness/contenders';
import { compareInterleaved, pairedRatio } from '../harness/rounds';
import type { Profile } from '../harness/profile';
import { target, type SuiteResult } from '../harness/result';
import { median } from '../harness/stats';

const CONTENDERS: ContenderName[] = ['ours-zookeeper', 'raw-zookeeper'];

/**
 * Issue 8, item 3: ours against the bare node-zookeeper-client recipe (create ephemeral
 * sequential + getChildren + delete; waiters watch their predecessor), uncontended in one
 * process, and contended by 8 worker processes (where the idle gap is the watch wake-up).
 * Runs on a standalone ZooKeeper it starts (ZK_CONNECT points it at another one).
 */
export async function zookeeperSuite(profile: Profile): Promise<SuiteResult> {
  const handoff = handoffFor(profile);
  const started = performance.now();
  const zkConnect = process.env.ZK_CONNECT ?? (await startZkStandalone()).connectString;
  const servers = { redisUrl: MACHINE_REDIS_URL, zkConnect };
  try {
    const roundTripMs = await zkRoundTripMs(zkConnect);
    const ours = await createContender('ours-zookeeper', servers);
    const raw = await createContender('raw-zookeeper', servers);
    const run = randomUUID().slice(0, 8);
    let cycle: Awaited<ReturnType<typeof compareInterleaved>>;
    try {
      const variants = [
        { name: 'raw floor (create + getChildren + delete)', contender: raw },
        { name: 'ours (LockService.acquire + release)', contender: ours },
      ].map(({ name, contender }, i) => ({
        name,
        op: async () => (await contender.acquire(`bench-cycle-${run}-${i}`)).release(),
      }));
      cycle = await compareInterleaved(variants, profile);
    } finally {
      await ours.close();
      await raw.close();
    }
    const { runs, results: contended } = await runHandoffs(
      CONTENDERS,
      servers,
      roundTripMs,
      handoff,
    );
    const [floor, oursCycle] = cycle;
    const [oursContended, rawContended] = CONTENDERS.map((name) =>
      contended.find((r) => r.contender === name)!,
    );
    return {
      id: 'zookeeper',
      title: 'ZooKeeper: ours vs the raw client recipe',
      tables: [
        cycleTable(
          'Uncontended cycle on ZooKeeper (one client, free key)',
          cycle,
          oursCycle,
          'Ours also reads the node’s czxid for the fencing token (pipelined with the ' +
            'queue read) and guards against orphaned nodes and dead sessions.',
        ),
        contendedTable(
          `Contended hand-off on ZooKeeper: ${handoff.workers} worker processes, one key, hold ${handoff.holdMs} ms, think ${handoff.thinkMs} ms`,
          contended,
          roundTripMs,
          'The idle gap is the watch wake-up: delete → watch event → getChildren → grant.',
        ),
      ],
      // Issue 18, item 4: uncontended at least 0.9x the floor, contended at least the recipe.
      targets: [
        target(
          'zookeeper-cycle-floor',
          'Uncontended ZooKeeper cycle: ours ÷ raw floor',
          pairedRatio(oursCycle, floor),
          '>=',
          0.9,
          'x',
        ),
        target(
          'zookeeper-contended-vs-recipe',
          'Contended ZooKeeper: ours ÷ raw recipe (locked ops/s)',
          oursContended.opsPerSec / rawContended.opsPerSec,
          '>=',
          1,
          'x',
        ),
      ],
      charts: [
        {
          id: 'zookeeper-cycle',
          title: 'Uncontended ZooKeeper acquire + release (cycles/s)',
          valueTitle: 'cycles/s',
          points: cycle.map((r, i) => ({
            label: r.name.replace(/ \(.*\)$/, ''),
            group: i === 0 ? 'floor' : 'ours',
            value: Math.round(r.opsPerSec),
          })),
        },
        contendedChart(
          'zookeeper-contended',
          `Contended ZooKeeper hand-off, ${handoff.workers} processes (locked ops/s)`,
          contended,
        ),
      ],
      data: {
        roundTripMs,
        oursOverFloor: pairedRatio(oursCycle, floor),
        cycle,
        runs,
      },
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    if (!process.env.ZK_CONNECT) await stopAllZk();
  }
}

/** Median round trip of `exists` on the raw recipe's root. */
async function zkRoundTripMs(connect: string): Promise<number> {
  const client = await connectZk(connect);
  try {
    const zk = zkCalls(client);
    const times: number[] = [];
    for (let i = 0; i < 300; i++) {
      const start = performance.now();
      await zk.children('/');
      if (i >= 50) times.push(performance.now() - start);
    }
    return median(times);
  } finally {
    client.close();
  }
}
