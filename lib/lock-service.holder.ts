import type { LockService } from './lock.service';
import type { LockManager } from './core/lock-manager';

/**
 * Where `@Locked` finds the service. Decorators run before DI exists, so the module sets
 * this when it initialises (nestjs-cls style); until then `@Locked` methods refuse to run.
 */
export const LockServiceHolder: {
  service?: LockService;
  manager?: LockManager;
} = {};
