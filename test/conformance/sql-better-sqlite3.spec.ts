import { runLockConformance } from './lock-conformance';
import { betterSqlite3Target } from './typeorm.targets';

// `type: 'sql'` on a bare `better-sqlite3` Database (no TypeORM): the whole battery.
runLockConformance(betterSqlite3Target());
