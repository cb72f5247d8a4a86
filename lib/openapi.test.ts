import { readFileSync } from 'node:fs';
import { describe, expect, test } from '@jest/globals';
import { Validator } from '@seriousme/openapi-schema-validator';
import { routes } from '../functions/manifest/routes.js';
import { buildOpenApi } from './openapi.js';

describe('the OpenAPI document', () => {
  test('is a valid OpenAPI 3.1 document (a real validator) describing every route of the manifest', async () => {
    const doc = (await buildOpenApi()) as { openapi: string; paths: Record<string, Record<string, any>> };
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
    for (const [id, def] of Object.entries(routes)) {
      const op = doc.paths[def.path]?.[def.method.toLowerCase()];
      expect({ id, operationId: op?.operationId }).toEqual({ id, operationId: id });
      expect(op.security.length).toBeGreaterThan(0);
    }
  }, 30_000);

  test('parameters and bodies come from the handlers’ zod schemas', async () => {
    const doc = (await buildOpenApi()) as { paths: Record<string, Record<string, any>> };
    const create = doc.paths['/v1/preview/environments']!.post;
    expect(create.requestBody.required).toBe(true);
    expect(create.requestBody.content['application/json'].schema.required).toEqual(
      expect.arrayContaining(['repoFullName', 'prNumber', 'headSha', 'headRef']),
    );
    const status = doc.paths['/v1/preview/environments/{owner}/{repo}/{pr}']!.get;
    expect(status.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual([
      'path:owner',
      'path:repo',
      'path:pr',
    ]);
    const list = doc.paths['/run']!.get;
    expect(list.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(['limit', 'offset', 'test', 'folder', 'status', 'media', 'steps']),
    );
    expect(list.responses['401']).toEqual({ $ref: '#/components/responses/E401' });
  }, 30_000);

  test('docs/openapi.json is what the code generates (run `npm run openapi` after changing a route)', async () => {
    const file = JSON.parse(readFileSync(new URL('../docs/openapi.json', import.meta.url), 'utf8'));
    expect(file).toEqual(JSON.parse(JSON.stringify(await buildOpenApi())));
  }, 30_000);
});
