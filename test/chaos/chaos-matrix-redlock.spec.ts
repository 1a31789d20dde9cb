/** The chaos matrix's mutex rows, reduced profile, on the Redlock column (3 nodes): see `ci-matrix.ts`. */
import { describeCiMatrix } from './ci-matrix';

describeCiMatrix('redlock');
