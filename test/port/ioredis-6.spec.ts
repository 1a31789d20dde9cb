import * as ioredis6 from 'ioredis6';
import { ioRedisFamily } from './families';
import { describeRedisPortContract } from './redis-port-contract';

describeRedisPortContract(ioRedisFamily('ioredis 6', 'ioredis', ioredis6, 'ioredis6'));
