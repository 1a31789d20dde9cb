import { SQL_LOCK_PAIRS } from '../../servers/databases';
import { runInputProperties } from './input-properties';
import {
  redisClusterTarget,
  redisTarget,
  redlockTarget,
  sqlTarget,
  zookeeperTarget,
} from './store-targets';

// Every real store, with fewer inputs than memory: each input costs round trips.
runInputProperties(redisTarget);
runInputProperties(redisClusterTarget);
runInputProperties(redlockTarget);
runInputProperties(zookeeperTarget);
for (const { kind, strategy } of SQL_LOCK_PAIRS) runInputProperties(sqlTarget(kind, strategy));
