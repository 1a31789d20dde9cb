/** The chaos matrix's mutex rows, reduced profile, on the Redis columns (AOF, and no persistence): see `ci-matrix.ts`. */
import { describeCiMatrix } from './ci-matrix';

describeCiMatrix('redis');
