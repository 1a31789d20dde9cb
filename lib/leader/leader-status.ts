import type { Leadership } from './leader.interfaces';

/** Where this instance stands for one name (`LeaderService.status`). */
export interface LeaderStatus {
  /** The name. */
  readonly name: string;
  /** `leader` while this instance leads the name, else `follower`. */
  readonly role: 'leader' | 'follower';
  /** The term while leading. */
  readonly term?: number;
  /** Since when it leads (wall clock), while leading. */
  readonly since?: Date;
  /** How many times this instance started or stopped leading the name. */
  readonly transitions: number;
}

/**
 * This instance's leaderships by name: which it holds now and how often that changed, for the
 * health indicator and metrics. Only what this process saw: who else leads is `leader(name)`.
 */
export class LeaderStatuses {
  private readonly byName = new Map<string, { current?: Leadership; transitions: number }>();

  /** This instance started to lead. */
  granted(leadership: Leadership): void {
    const entry = this.entry(leadership.name);
    entry.current = leadership;
    entry.transitions++;
  }

  /** A leadership of this instance ended (resigned, lost or shut down); `false` if not current. */
  ended(leadership: Leadership): boolean {
    const entry = this.entry(leadership.name);
    if (entry.current !== leadership) return false;
    entry.current = undefined;
    entry.transitions++;
    return true;
  }

  /** Names this instance campaigned for or leads. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /** Where this instance stands for `name` (a follower until it leads). */
  of(name: string): LeaderStatus {
    const entry = this.byName.get(name);
    const current = entry?.current?.isLeader() ? entry.current : undefined;
    const transitions = entry?.transitions ?? 0;
    return current
      ? { name, role: 'leader', term: current.term, since: current.since, transitions }
      : { name, role: 'follower', transitions };
  }

  /** Marks `name` as one this instance takes part in (a campaign started). */
  campaigning(name: string): void {
    this.entry(name);
  }

  private entry(name: string) {
    let entry = this.byName.get(name);
    if (!entry) {
      entry = { transitions: 0 };
      this.byName.set(name, entry);
    }
    return entry;
  }
}
