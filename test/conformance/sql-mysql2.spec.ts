import { runLockConformance } from './lock-conformance';
import { mysql2PoolTarget } from './typeorm.targets';

// `type: 'sql'` on a bare `mysql2` pool (no TypeORM), on MariaDB: every strategy, the whole
// battery, on both of mysql2's APIs.
runLockConformance(mysql2PoolTarget('table', 'callback'));
runLockConformance(mysql2PoolTarget('for-update', 'callback'));
runLockConformance(mysql2PoolTarget('advisory', 'promise'));
