// redlock 4.2.0 ships no types; the bench uses this much of it (the library itself loads it
// through lib/core/shared/optional-package.ts with its own structural types).
declare module 'redlock' {
  import type { EventEmitter } from 'node:events';

  namespace Redlock {
    interface Options {
      driftFactor?: number;
      retryCount?: number;
      retryDelay?: number;
      retryJitter?: number;
    }
    interface Lock {
      unlock(): Promise<void>;
      extend(ttl: number): Promise<Lock>;
    }
  }

  class Redlock extends EventEmitter {
    constructor(clients: unknown[], options?: Redlock.Options);
    lock(resource: string | string[], ttl: number): Promise<Redlock.Lock>;
    quit(): Promise<void>;
  }

  export = Redlock;
}
