import * as redis from 'redis';
import { nodeRedisFamily } from './families';
import { describeRedisPortContract } from './redis-port-contract';

describeRedisPortContract(nodeRedisFamily('node-redis 5', redis));
