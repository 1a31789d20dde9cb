import { runLockConformance } from './lock-conformance';
import { typeormTarget } from './typeorm.targets';

// The machine's mariadb (scripts/ensure-services.sh starts it and creates the locktest database).
runLockConformance(typeormTarget('mariadb', 'table'));
runLockConformance(typeormTarget('mariadb', 'for-update'));
runLockConformance(typeormTarget('mariadb', 'advisory'));
