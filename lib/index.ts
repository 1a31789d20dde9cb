/**
 * nestjs-distributed-lock: distributed locks for NestJS with fencing tokens, lost-lock
 * signals, reentrancy and one conformance suite across Redis, Redlock, ZooKeeper and SQL.
 * This file is the whole public API; anything not exported here is internal.
 */
export { LockModule } from './lock.module';
export type { LockModuleExtras } from './lock.module-definition';
export { LockService } from './lock.service';
export { Locked } from './decorators/locked.decorator';
export { InjectLockBackend } from './decorators/inject-lock-backend.decorator';
export { getLockBackendToken } from './lock.constants';
export { LeaderService } from './leader/leader.service';
export { LeaderOnly } from './leader/leader-only.decorator';
export { Leader } from './leader/leader.decorator';
export type {
  Leadership,
  CampaignOptions,
  LeaderInfo,
  ObserveOptions,
  LeaderDecoratorOptions,
  OnLeadershipGranted,
  OnLeadershipRevoked,
} from './leader/leader.interfaces';
export type { LeaderStatus } from './leader/leader-status';
export type {
  LeadershipEvent,
  LeadershipEventListener,
  LeadershipEventName,
} from './leader/leader-events';
export {
  LockError,
  LockNotAcquiredError,
  LockLostError,
  LockConfigError,
  LockBackendError,
  LockAbortedError,
  LockShuttingDownError,
  type LockErrorCode,
} from './errors/lock.errors';
export type {
  Lock,
  LockOptions,
  LockedOptions,
  LockEvent,
  LockEventName,
  LockEventListener,
  LockMetrics,
  LockBackendHealth,
  LockInfo,
  LockHealthOptions,
  LockMode,
} from './lock.interfaces';
export type { LockModuleOptions, LockDefaults, LockShutdownOptions } from './lock.module-options';
export type { LockKeySource } from './core/settings/key-template';
export type {
  LockBackendConfig,
  MemoryBackendConfig,
  RedisBackendConfig,
  RedlockBackendConfig,
  ZookeeperBackendConfig,
  TypeormBackendConfig,
  SqlBackendConfig,
} from './backends/backend-config';
