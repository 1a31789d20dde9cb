// `npm run compat:readme`: writes the README's compatibility table from test/compat/cells.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import { CELLS } from './cells';
import { readmeBlock, withReadmeBlock } from './readme-table';

const readme = readFileSync('README.md', 'utf8');
writeFileSync('README.md', withReadmeBlock(readme, readmeBlock(CELLS)));
console.log('README.md: compatibility table rendered from test/compat/cells.ts');
