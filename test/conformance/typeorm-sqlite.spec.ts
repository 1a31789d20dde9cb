import { runLockConformance } from './lock-conformance';
import { typeormTarget } from './typeorm.targets';

// An SQLite file of its own (better-sqlite3); only the table strategy exists for SQLite.
runLockConformance(typeormTarget('sqlite', 'table'));
