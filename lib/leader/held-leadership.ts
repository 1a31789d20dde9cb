import { LockConfigError } from '../errors/lock.errors';
import type { Lock } from '../lock.interfaces';
import type { Leadership } from './leader.interfaces';

/**
 * A {@link Leadership} over the lock that grants it: the term is the lock's fence, the signal
 * and `isLeader()` are the lock's, resigning releases it (the store hands it to the next
 * candidate in its queue at once).
 */
export class HeldLeadership implements Leadership {
  readonly since = new Date();
  private resigned = false;

  constructor(
    readonly name: string,
    private readonly lock: Lock,
    /** Told once when leadership ends for good (resigned or lost). */
    private readonly onEnd: (leadership: HeldLeadership) => void,
  ) {
    if (lock.signal.aborted) onEnd(this);
    else lock.signal.addEventListener('abort', () => onEnd(this), { once: true });
  }

  get backend(): string {
    return this.lock.backend;
  }

  get term(): number {
    return this.lock.fence as number;
  }

  get signal(): AbortSignal {
    return this.lock.signal;
  }

  isLeader(): boolean {
    return this.lock.isHeld();
  }

  async resign(): Promise<void> {
    if (this.resigned) {
      throw new LockConfigError(
        'resign',
        `leadership of "${this.name}" (term ${this.term}) was already resigned`,
      );
    }
    this.resigned = true;
    await this.lock.release();
  }

  /** What `util.inspect` shows (never the lock's token). */
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    const state = this.isLeader() ? 'leading' : this.resigned ? 'resigned' : 'lost';
    return `Leadership { name: ${JSON.stringify(this.name)}, term: ${this.term}, ${state} }`;
  }
}
