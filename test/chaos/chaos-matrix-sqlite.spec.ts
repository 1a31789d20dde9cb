/** The chaos matrix's mutex rows, reduced profile, on the SQLite column (table): see `ci-matrix.ts`. */
import { describeCiMatrix } from './ci-matrix';

describeCiMatrix('sqlite');
