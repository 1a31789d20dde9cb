/**
 * `nestjs-distributed-lock/typeorm`: schema helpers for the `typeorm` backend. A separate entry
 * point so that applications on other backends never load `typeorm`.
 */
export { DistributedLockEntity } from './distributed-lock.entity';
export { createDistributedLockMigration } from './distributed-lock.migration';
