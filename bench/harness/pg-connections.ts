import { connectSql } from './sql-contenders';

/** The most connections one PostgreSQL client application held, seen from outside. */
export interface PgConnectionPeak {
  /** Most connections of the application open at once (`pg_stat_activity`), idle ones too. */
  connections: number;
  /**
   * Most of them in use at once: anything but `idle` (a statement running or waiting, or a
   * transaction open, as a `for-update` holder's is); an idle one is free in its pool.
   */
  inUse: number;
  /** Most of them waiting for a lock in the database at once (`wait_event_type = 'Lock'`). */
  waitingInDatabase: number;
  /** Samples taken. */
  samples: number;
}

/** How often the watcher looks, ms. */
const SAMPLE_EVERY_MS = 10;

/**
 * Watches, from a connection of its own, the connections that carry `applicationName`
 * (`application_name`: every connection a DataSource's pool opens carries it, and so would a
 * listening client made from its options) until `stop()`, which resolves the peaks.
 */
export async function watchPgConnections(
  applicationName: string,
): Promise<{ stop(): Promise<PgConnectionPeak> }> {
  const connection = await connectSql('postgres');
  const peak: PgConnectionPeak = { connections: 0, inUse: 0, waitingInDatabase: 0, samples: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const [row] = await connection.query(
        `SELECT count(*)::int AS n,
                count(*) FILTER (WHERE state IS DISTINCT FROM 'idle')::int AS busy,
                count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS waiting
           FROM pg_stat_activity WHERE application_name = $1`,
        [applicationName],
      );
      peak.connections = Math.max(peak.connections, Number(row.n));
      peak.inUse = Math.max(peak.inUse, Number(row.busy));
      peak.waitingInDatabase = Math.max(peak.waitingInDatabase, Number(row.waiting));
      peak.samples++;
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_EVERY_MS));
    }
  })();
  loop.catch(() => undefined); // a failed sample is rethrown by stop(), not left unhandled
  return {
    async stop() {
      running = false;
      try {
        await loop;
      } finally {
        await connection.end();
      }
      return peak;
    },
  };
}
