/**
 * What an instance reports of its leaderships without asking the store: `LeaderService.status`
 * and the terminus `LeaderHealthIndicator` (leader or follower, the term, since when, how many
 * transitions), through a grant, a resign and a loss.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import { TerminusModule } from '@nestjs/terminus';
import { LeaderService } from '../../lib/leader/leader.service';
import { LeaderHealthIndicator, LockHealthModule } from '../../lib/terminus/index';
import { createLockApp, type LockTestApp } from '../support/lock-app';

let t: LockTestApp | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe('leadership status and health', () => {
  it('reports leader with term and since while leading, follower after, counting transitions', async () => {
    t = await createLockApp(
      { backends: { local: { type: 'memory' } } },
      { imports: [TerminusModule, LockHealthModule] },
    );
    const leaders = t.app.get(LeaderService);
    const health = t.app.get(LeaderHealthIndicator);
    expect(health.isHealthy()).toEqual({});
    expect(leaders.status('jobs')).toEqual({ name: 'jobs', role: 'follower', transitions: 0 });

    const before = Date.now();
    const lead = await leaders.campaign('jobs');
    const leading = leaders.status('jobs');
    expect(leading).toMatchObject({ role: 'leader', term: lead.term, transitions: 1 });
    expect(leading.since!.getTime()).toBeGreaterThanOrEqual(before);
    expect(health.isHealthy()).toEqual({
      'leader:jobs': {
        status: 'up',
        role: 'leader',
        term: lead.term,
        since: leading.since!.toISOString(),
        transitions: 1,
      },
    });

    await lead.resign();
    expect(health.isHealthy({ keyPrefix: 'lead/' })).toEqual({
      'lead/jobs': { status: 'up', role: 'follower', transitions: 2 },
    });

    // A loss (an operator frees the key) is a transition too.
    const again = await leaders.campaign('jobs');
    await t.locks.forceRelease('nestjs-distributed-lock:leader:jobs');
    expect(again.isLeader()).toBe(false);
    expect(leaders.status()).toEqual([{ name: 'jobs', role: 'follower', transitions: 4 }]);
  });
});
