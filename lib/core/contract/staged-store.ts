/**
 * What the testing kit's store does beyond the contract: it stages what other instances and the
 * store would do (a key held elsewhere, a lock lost now, a call that fails next). Keys carry the
 * module's prefix, as every backend's do.
 */
export interface StagedStore {
  /**
   * Takes `key` for a holder of its own (`token`) as another instance would, first taking it
   * from this process's holders (each reported lost) when `seize`; `false` when it is busy and
   * not seized.
   */
  holdElsewhere(key: string, token: string, seize: boolean): Promise<boolean>;
  /** Ends a hold taken by `holdElsewhere`. */
  freeElsewhere(key: string, token: string): Promise<void>;
  /** Every holder of `key` in this process loses it now (reported with `reason`); how many. */
  loseAll(key: string, reason: string): number;
  /** The next acquisition of `key` (a try or a wait) fails with `error`. */
  failNext(key: string, error: Error): void;
}

/** Whether a backend is the testing kit's store. */
export function isStagedStore(backend: object): backend is StagedStore {
  const store = backend as Partial<StagedStore>;
  return (
    typeof store.holdElsewhere === 'function' &&
    typeof store.loseAll === 'function' &&
    typeof store.failNext === 'function'
  );
}
