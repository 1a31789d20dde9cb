import { runLockConformance } from './lock-conformance';
import { pgPoolTarget } from './typeorm.targets';

// `type: 'sql'` on a bare `pg` Pool (no TypeORM): every strategy, the whole battery.
runLockConformance(pgPoolTarget('table'));
runLockConformance(pgPoolTarget('for-update'));
runLockConformance(pgPoolTarget('advisory'));
