import { Injectable } from '@nestjs/common';
import { LockService, Locked } from '../../lib';
import { compareInterleaved, pairedRatio, type Variant } from '../harness/rounds';
import { startLocks } from '../harness/nest-locks';
import type { Profile } from '../harness/profile';
import { fmt, target, type SuiteResult } from '../harness/result';

/**
 * The same trivial body three ways, as a user's provider would write it. The `withLock`
 * method wraps the unlocked async method, which is exactly what `@Locked` does to the method it
 * decorates (an async wrapper calling `withLock` around the original async method), so the two
 * locked variants differ only by what the decorator adds: key templating, its try/catch and its
 * options object.
 */
@Injectable()
class DecoratorBenchService {
  constructor(private readonly locks: LockService) {}

  async plain(id: number): Promise<number> {
    return id + 1;
  }

  async viaWithLock(id: number): Promise<number> {
    return this.locks.withLock('bench:' + id, () => this.plain(id));
  }

  @Locked('bench:{0}')
  async decorated(id: number): Promise<number> {
    return id + 1;
  }
}

/**
 * Issue 8, decorator overhead: `@Locked` vs a direct `withLock` vs no lock, one caller, memory
 * backend (no I/O, so the figures are the library's own CPU cost per call, which is where a
 * decorator's overhead would show; on a networked backend it would drown in the round trips).
 */
export async function decoratorSuite(profile: Profile): Promise<SuiteResult> {
  const started = performance.now();
  const app = await startLocks({ backends: { memory: { type: 'memory' } } }, [
    DecoratorBenchService,
  ]);
  try {
    const service = app.get(DecoratorBenchService);
    const id = 7;
    // Every variant checks its answer, so none can be optimised into doing nothing.
    const expect = async (value: Promise<number>): Promise<void> => {
      if ((await value) !== id + 1) throw new Error('decorator bench: wrong result');
    };
    const variants: Variant[] = [
      { name: 'no lock (plain async method)', op: () => expect(service.plain(id)) },
      {
        name: "withLock ('bench:' + id)",
        op: () => expect(service.viaWithLock(id)),
      },
      { name: "@Locked('bench:{0}')", op: () => expect(service.decorated(id)) },
    ];
    const results = await compareInterleaved(variants, profile);
    const [none, direct, decorated] = results;
    // Time ratio @Locked ÷ withLock = rate ratio withLock ÷ @Locked, paired round by round.
    const ratio = pairedRatio(direct, decorated);
    const added = (r: typeof none): number => r.usPerOp - none.usPerOp;
    return {
      id: 'decorator',
      title: 'Decorator overhead: @Locked vs withLock vs no lock (memory backend)',
      tables: [
        {
          title: 'Cost per call, memory backend, one caller, free key',
          columns: ['Variant', 'calls/s', 'µs/call', 'added µs vs no lock', 'time ÷ withLock'],
          rows: results.map((r) => [
            r.name,
            fmt(r.opsPerSec),
            fmt(r.usPerOp),
            r === none ? '0' : fmt(added(r)),
            r === direct ? '1' : fmt(pairedRatio(direct, r)),
          ]),
          note:
            'Medians of interleaved rounds; "time ÷ withLock" is the median of per-round rate ratios ' +
            '(withLock rate ÷ this rate), so above 1 means slower than withLock. The memory backend ' +
            'does no I/O: the figures are the CPU cost of the lock path itself (key, token, lease, ' +
            'reentrancy scope, renewal timer, release) and of the decorator on top of it.',
        },
      ],
      targets: [
        target(
          'decorator-overhead',
          '@Locked time ÷ withLock time (memory backend)',
          ratio,
          '<=',
          1.05,
          'x',
        ),
      ],
      charts: [
        {
          id: 'decorator',
          title: 'Cost per call, memory backend (µs/call, lower is better)',
          valueTitle: 'µs/call',
          points: [
            { label: 'none', group: 'floor', value: Number(none.usPerOp.toFixed(2)) },
            { label: 'withLock', group: 'ours', value: Number(direct.usPerOp.toFixed(2)) },
            { label: '@Locked', group: 'ours', value: Number(decorated.usPerOp.toFixed(2)) },
          ],
        },
      ],
      data: {
        results,
        addedUs: { withLock: added(direct), locked: added(decorated) },
        lockedOverWithLock: ratio,
      },
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await app.close();
  }
}
