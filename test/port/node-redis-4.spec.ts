import * as redis4 from 'redis4';
import { nodeRedisFamily } from './families';
import { describeRedisPortContract } from './redis-port-contract';

describeRedisPortContract(nodeRedisFamily('node-redis 4', redis4, 'redis4'));
