import { runLockConformance } from './lock-conformance';
import { typeormTarget } from './typeorm.targets';

// The machine's postgres (scripts/ensure-services.sh starts it and creates the locktest database).
runLockConformance(typeormTarget('postgres', 'table'));
runLockConformance(typeormTarget('postgres', 'for-update'));
runLockConformance(typeormTarget('postgres', 'advisory'));
