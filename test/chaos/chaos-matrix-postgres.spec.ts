/** The chaos matrix's mutex rows, reduced profile, on the PostgreSQL columns (table, advisory; for-update black-holed): see `ci-matrix.ts`. */
import { describeCiMatrix } from './ci-matrix';

describeCiMatrix('postgres');
