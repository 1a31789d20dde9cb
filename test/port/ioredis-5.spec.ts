import * as ioredis from 'ioredis';
import { ioRedisFamily } from './families';
import { describeRedisPortContract } from './redis-port-contract';

describeRedisPortContract(ioRedisFamily('ioredis 5', 'ioredis', ioredis));
