/** `npm run openapi`: write docs/openapi.json from the route manifest and the handlers' schemas. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildOpenApi } from './openapi.js';

const target = join(new URL('..', import.meta.url).pathname, 'docs', 'openapi.json');
writeFileSync(target, `${JSON.stringify(await buildOpenApi(), null, 2)}\n`);
process.stdout.write(`wrote ${target}\n`);
