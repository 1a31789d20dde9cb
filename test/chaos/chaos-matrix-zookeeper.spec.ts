/** The chaos matrix's mutex rows, reduced profile, on the ZooKeeper column (3-node ensemble): see `ci-matrix.ts`. */
import { describeCiMatrix } from './ci-matrix';

describeCiMatrix('zookeeper');
