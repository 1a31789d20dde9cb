/**
 * The safety checker of the sharing rows: given every hold of one key (from the workers'
 * histories), finds the instants the key admitted more than it may, slots handed out twice,
 * and fences that did not rise. Pure, on plain data, so it is tested on its own
 * (admission-check.spec.ts), violations included: a checker that never finds anything proves
 * nothing.
 *
 * A hold is [grant recorded, release about to be sent or loss noticed]: inside the true hold,
 * so two recorded holds that overlap truly did.
 */
import type { LockMode } from '../../lib/core/contract/lock-backend';

/** One hold of the key, as a worker recorded it. */
export interface AdmittedHold {
  readonly worker: string;
  readonly token: string;
  readonly mode: LockMode;
  /** The `permits` the holder asked for (1: a mutex or a shared lock). */
  readonly permits: number;
  /** `lock.permit`: the slot held. */
  readonly permit: number;
  readonly fence: number | null;
  /** Monotonic ns (`process.hrtime.bigint()`, machine-wide). */
  readonly start: bigint;
  readonly end: bigint;
}

/** What the checker found. */
export interface AdmissionCheck {
  /** Instants the key held more than it may, or a writer beside anyone. */
  readonly overAdmissions: number;
  /** Grants of a slot another live holder held, or out of 0..permits-1. */
  readonly slotViolations: number;
  /** Fences repeated, missing, or lower than one granted before a hold that could not overlap. */
  readonly fenceViolations: number;
  /** The first few, for the report. */
  readonly findings: readonly string[];
  /** Most holders at once. */
  readonly maxHolders: number;
}

const MAX_FINDINGS = 5;

const describe = (h: AdmittedHold): string =>
  `${h.worker} ${h.mode}${h.permits > 1 ? ` slot ${h.permit}/${h.permits}` : ''} fence ${h.fence}`;

/**
 * Checks every hold of one key: at each grant, the holders already there must admit it (a
 * shared hold only beside shared ones, an exclusive one beside at most permits - 1 exclusive
 * ones, none with a mutex), on a free slot in range; every fence is unique, and rises across
 * holds that cannot have overlapped (one ended before the other began and one of them excludes
 * all others).
 */
export function checkAdmission(holds: readonly AdmittedHold[]): AdmissionCheck {
  const findings: string[] = [];
  const note = (text: string): void => {
    if (findings.length < MAX_FINDINGS) findings.push(text);
  };
  let overAdmissions = 0;
  let slotViolations = 0;
  let fenceViolations = 0;
  let maxHolders = 0;

  // Ends before grants at one instant: a hand-over is not an overlap.
  const edges = holds.flatMap((h) => [
    { t: h.start, grant: true, h },
    { t: h.end, grant: false, h },
  ]);
  edges.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : Number(a.grant) - Number(b.grant)));
  const live = new Set<AdmittedHold>();
  for (const { grant, h } of edges) {
    if (!grant) {
      live.delete(h);
      continue;
    }
    const others = [...live];
    const sharedBeside = others.some((o) => o.mode !== h.mode);
    const tooMany =
      h.mode === 'exclusive' && others.filter((o) => o.mode === 'exclusive').length >= h.permits;
    if (sharedBeside || tooMany) {
      overAdmissions++;
      note(`${describe(h)} granted beside ${others.map(describe).join(', ')}`);
    }
    const twice = others.find((o) => o.mode === 'exclusive' && o.permit === h.permit);
    if (!Number.isInteger(h.permit) || h.permit < 0 || h.permit >= h.permits || twice) {
      slotViolations++;
      note(
        `${describe(h)}: ${twice ? `slot also held by ${describe(twice)}` : 'slot out of range'}`,
      );
    }
    live.add(h);
    maxHolders = Math.max(maxHolders, live.size);
  }

  const fences = holds.map((h) => h.fence);
  if (fences.some((f) => f === null) || new Set(fences).size !== fences.length) {
    fenceViolations++;
    note(`fences not unique: ${fences.join(', ')}`);
  }
  for (const a of holds) {
    for (const b of holds) {
      const disjoint = a.end < b.start && (a.mode === 'exclusive' || b.mode === 'exclusive');
      // With permits above 1, exclusive holders of other slots may overlap: no order follows.
      if (disjoint && a.permits === 1 && b.permits === 1 && (a.fence ?? 0) >= (b.fence ?? 0)) {
        fenceViolations++;
        note(`${describe(a)} ended before ${describe(b)} began`);
      }
    }
  }
  return { overAdmissions, slotViolations, fenceViolations, findings, maxHolders };
}
