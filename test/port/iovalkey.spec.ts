import * as iovalkey from 'iovalkey';
import { ioRedisFamily } from './families';
import { describeRedisPortContract } from './redis-port-contract';

describeRedisPortContract(ioRedisFamily('iovalkey', 'iovalkey', iovalkey));
