import type { ValueTransformer } from 'typeorm';

/**
 * Reads a `bigint` column as a JS number. Postgres and MariaDB drivers return 64-bit integers
 * as strings (to stay exact past 2^53); fences (ZooKeeper zxids included) stay far below that.
 */
export const bigintAsNumber: ValueTransformer = {
  to: (value: number | null | undefined) => value,
  from: (value: string | number | null) => (value === null ? null : Number(value)),
};
