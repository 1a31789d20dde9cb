import * as redis6 from 'redis6';
import { nodeRedisFamily } from './families';
import { describeRedisPortContract } from './redis-port-contract';

// node-redis 6 speaks RESP3 unless told `RESP: 2`: the contract's replies are read through it.
describeRedisPortContract(nodeRedisFamily('node-redis 6', redis6, 'redis6'));
