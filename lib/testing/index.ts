/**
 * `nestjs-distributed-lock/testing`: test code that locks, without a store. `LockTestingModule`
 * in place of `LockModule`, and `LockTesting` to stage other instances, lost locks and store
 * failures, read what happened, and assert that code ran under its lock.
 */
export { LockTestingModule } from './lock-testing.module';
export { LockTesting, type LockHistoryEntry, type LockTestingKeyOptions } from './lock-testing';
