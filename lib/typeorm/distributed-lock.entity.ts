import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * The lock table of the `typeorm` backend (default name `distributed_lock`), for apps that
 * manage their schema from entities. `lock_key` is the SHA-256 hex of the key; `key_text` keeps
 * the key itself for display; `expires_at` is epoch milliseconds of the database server's clock.
 * Besides the rows of keys held now, the table keeps its fence counter rows (`lock_key`s
 * beginning with `~`): never delete those, fences must keep growing. Prefer the migration
 * ({@link createDistributedLockMigration}) for a custom table name.
 */
@Entity({ name: 'distributed_lock' })
export class DistributedLockEntity {
  /** SHA-256 hex of the lock key. */
  @PrimaryColumn({ name: 'lock_key', type: 'varchar', length: 64 })
  lockKey!: string;

  /** The key as given (prefix included). */
  @Column({ name: 'key_text', type: 'text' })
  keyText!: string;

  /** Owner token of the current holder; `null` when free. */
  @Column({ name: 'owner', type: 'varchar', length: 1024, nullable: true })
  owner!: string | null;

  /** Lease end in epoch ms (database clock); `null` when free. */
  @Column({ name: 'expires_at', type: 'bigint', nullable: true })
  expiresAt!: string | null;

  /** A held key's fence, or a fence counter's value (reserved rows). */
  @Column({ name: 'fence', type: 'bigint', default: 0 })
  fence!: string;
}
