/**
 * The sharing rows of the chaos matrix (issue 19): a holder of a counted lock's slot, or of a
 * read hold, is struck (the fault named, `kill -9` today) while others wait; the slot or the
 * hold must come back within the backend's bound, and the key must never admit more than it
 * may. Each row is data: which capability it needs, what the victim and each other worker ask
 * for, and when the key counts as given back. A backend gets a row where it declares the
 * capability (read from the backend itself, see `backend-capabilities.ts`).
 */
import type { LockMode } from '../../lib/core/contract/lock-backend';

/** What one worker asks for, every time it takes the key. */
export interface SharingRequest {
  readonly mode: LockMode;
  readonly permits: number;
}

/** One sharing row. */
export interface SharingScenario {
  readonly id: string;
  readonly label: string;
  /** The capability the backend must declare (`capabilities.shared` / `.permits`). */
  readonly capability: 'shared' | 'permits';
  /** The fault of the matrix that strikes the victim (its `inject` and `boundMs` are used). */
  readonly fault: 'holder-kill';
  /** The victim's request (it holds its first grant `strikeHoldMs` and is struck in it). */
  readonly victim: SharingRequest;
  /** The other workers' requests: each takes the key in a loop, a short random hold each time. */
  readonly others: readonly SharingRequest[];
  /**
   * When the key counts as given back after the fault: a grant of this mode that leaves this
   * many live holders at once (the victim's slot or hold is the only thing that kept it from
   * happening before).
   */
  readonly recovered: { readonly mode: LockMode; readonly holders: number };
}

const PERMITS = 2;

export const SHARING_SCENARIOS: readonly SharingScenario[] = [
  {
    id: 'slot-holder-kill',
    label: `counted lock (permits ${PERMITS}): a slot’s holder \`kill -9\``,
    capability: 'permits',
    fault: 'holder-kill',
    victim: { mode: 'exclusive', permits: PERMITS },
    // One more than the slots the victim leaves: one of them always waits for its slot.
    others: [
      { mode: 'exclusive', permits: PERMITS },
      { mode: 'exclusive', permits: PERMITS },
    ],
    // Both others at once: only possible with the victim's slot back.
    recovered: { mode: 'exclusive', holders: PERMITS },
  },
  {
    id: 'read-holder-kill',
    label: 'shared lock: a read hold’s holder `kill -9` while a writer waits',
    capability: 'shared',
    fault: 'holder-kill',
    victim: { mode: 'shared', permits: 1 },
    // The writer waits for the victim's read hold; the reader queues behind the waiting writer.
    others: [
      { mode: 'exclusive', permits: 1 },
      { mode: 'shared', permits: 1 },
    ],
    recovered: { mode: 'exclusive', holders: 1 },
  },
];
