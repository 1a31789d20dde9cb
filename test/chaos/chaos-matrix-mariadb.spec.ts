/** The chaos matrix's mutex rows, reduced profile, on the MariaDB columns (for-update; advisory black-holed): see `ci-matrix.ts`. */
import { describeCiMatrix } from './ci-matrix';

describeCiMatrix('mariadb');
