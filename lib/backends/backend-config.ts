/**
 * Configuration of one backend, discriminated by `type`. Each backend folder contributes its
 * own member; backends other than `memory` arrive with their issues.
 */
export type LockBackendConfig = MemoryBackendConfig;

/** In-process backend: FIFO waiters, ttl and fence; for tests and single-instance apps. */
export interface MemoryBackendConfig {
  /** Discriminator. */
  type: 'memory';
}
