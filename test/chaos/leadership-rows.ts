/**
 * The leadership rows of the chaos matrix: the leader (a `@Leader` candidate working in ticks
 * under its term, see leadership-worker.ts) is killed, paused past its lease, or partitioned
 * from the store while two other candidates wait; another must lead within the backend's bound,
 * and the merged history must show at most one leader at any instant (each leadership from its
 * grant to its last observation of `isLeader()`), terms strictly rising, no lost witness update,
 * and no late write under an old term accepted by the fenced resource. Each row is the mutex
 * row of the same fault, struck at a leader instead of a lock holder.
 */
import type { ChaosTiming } from './backends';
import { FAULTS, type Fault } from './faults';

/** The leadership rows' worker. */
export const LEADER_WORKER = 'test/chaos/leadership-worker.ts';

/**
 * Shortest leadership ttl and SQL session timeout the rows use, ms: a leadership lease needs a
 * validity of 1 s, and a session strategy's validity is 90% of its session timeout.
 */
const MIN_LEADER_LEASE_MS = 1_500;

/** `timing` for the leadership rows: the ttl and SQL session timeout raised to what a leadership needs. */
export function leadershipTiming(timing: ChaosTiming): ChaosTiming {
  return {
    ...timing,
    ttl: Math.max(timing.ttl, MIN_LEADER_LEASE_MS),
    sqlSessionTimeout: Math.max(timing.sqlSessionTimeout, MIN_LEADER_LEASE_MS),
  };
}

/** The mutex row `base`, struck at the leader, as row `id`. */
function leaderRow(base: string, id: string, label: string): Fault {
  const fault = FAULTS.find((f) => f.id === base);
  if (!fault) throw new Error(`no fault ${base}`);
  return { ...fault, id, label };
}

export const LEADERSHIP_ROWS: readonly Fault[] = [
  leaderRow('holder-kill', 'leader-kill', 'leader `kill -9`'),
  leaderRow('holder-pause', 'leader-pause', 'leader `SIGSTOP` > lease, then `SIGCONT`'),
  leaderRow('partition', 'leader-partition', 'leader partitioned (`ip netns`, link down) > lease'),
];
