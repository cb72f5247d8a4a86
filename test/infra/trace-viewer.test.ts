import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { build } from 'esbuild';
import { pages } from '../../functions/manifest/routes.js';
import { copyModulesHooks, lambdaEsbuildOptions, repoRoot } from '../../lib/cdk/bundling.js';
import { type Json, logicalIdOf, resourcesOf, synthesize } from './synth.js';

/*
 * The AWS half of the trace viewer: the run report links `/trace-viewer/index.html?trace=…`, so
 * the API has that route, served by its own function (the `traceViewer` page) with the viewer's files
 * beside its bundle; and the media bucket lets the viewer (on the API's origin) read a run's trace through
 * its presigned URL (a CORS rule for that origin only, GET/HEAD only).
 */

const { stateless, statelessTemplate: template } = synthesize();
const resources = template.toJSON().Resources as Record<string, Json>;
const page = pages.traceViewer;
const fnId = logicalIdOf(stateless.api.pageFunctions.traceViewer);
const restApiId = logicalIdOf(stateless.api.restApi);

function resourcePath(ref: { Ref?: string; 'Fn::GetAtt'?: string[] }): string {
  if (!ref.Ref) return '';
  const r = resources[ref.Ref];
  return `${resourcePath(r.Properties.ParentId)}/${r.Properties.PathPart}`;
}

describe('the trace viewer route', () => {
  test('GET /trace-viewer/{proxy+} is a Lambda proxy to the page function, with no authorizer', () => {
    const methods = Object.values(resourcesOf(template, 'AWS::ApiGateway::Method')).filter(
      (m) => resourcePath(m.Properties.ResourceId) === '/trace-viewer/{proxy+}',
    );
    expect(methods.map((m) => m.Properties.HttpMethod)).toEqual(['GET']);
    const [method] = methods;
    expect(method.Properties.AuthorizationType).toBe('NONE');
    expect(method.Properties.Integration.Type).toBe('AWS_PROXY');
    expect(JSON.stringify(method.Properties.Integration.Uri)).toContain(fnId);
    expect(resources[fnId].Properties.Description).toBe(`GET ${page.path}`);
  });

  test('its function is granted nothing but its own log group (the files hold no data)', () => {
    const roleId = resources[fnId].Properties.Role['Fn::GetAtt'][0];
    const statements = Object.values(resourcesOf(template, 'AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties.Roles).includes(roleId))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as Json[]);
    const actions = statements.flatMap((s) => [s.Action].flat() as string[]);
    for (const action of actions) expect(action).toMatch(/^(logs:|xray:)/);
    expect(Object.keys(resources[fnId].Properties.Environment.Variables)).not.toContain('MEDIA_BUCKET');
  });
});

describe('the media bucket', () => {
  test('lets the API origin (and only it) read objects cross-origin, GET and HEAD only', () => {
    const bucketId = logicalIdOf(stateless.testRuns.mediaBucket);
    const cors = resources[bucketId].Properties.CorsConfiguration;
    expect(cors.CorsRules).toHaveLength(1);
    const [rule] = cors.CorsRules;
    expect(rule.AllowedMethods.sort()).toEqual(['GET', 'HEAD']);
    expect(rule.AllowedHeaders).toEqual(['Range']);
    expect(rule.ExposedHeaders).toEqual(expect.arrayContaining(['Content-Length', 'Content-Range']));
    expect(rule.AllowedOrigins).toHaveLength(1);
    const origin = JSON.stringify(rule.AllowedOrigins[0]);
    expect(origin).not.toContain('*');
    // https://<rest api id>.execute-api.<region>.<url suffix>: the origin the viewer is served from.
    expect(rule.AllowedOrigins[0]).toEqual({
      'Fn::Join': [
        '',
        [
          'https://',
          { Ref: restApiId },
          '.execute-api.',
          { Ref: 'AWS::Region' },
          '.',
          { Ref: 'AWS::URLSuffix' },
        ],
      ],
    });
  });

  test('stays private: all public access blocked', () => {
    const bucketId = logicalIdOf(stateless.testRuns.mediaBucket);
    expect(resources[bucketId].Properties.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
  });
});

describe('the page bundle, as deployed', () => {
  const out = mkdtempSync(join(tmpdir(), 'trace-viewer-bundle-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  test('serves the viewer from the files copied beside it, outside the repository', async () => {
    // Prepare: esbuild as CDK bundles it, then the bundling hook's copy of the page's `files`.
    await build({
      entryPoints: [join(repoRoot, page.entry)],
      absWorkingDir: repoRoot,
      bundle: true,
      platform: 'node',
      outfile: join(out, 'index.mjs'),
      logLevel: 'error',
      ...lambdaEsbuildOptions(),
    });
    for (const command of copyModulesHooks(page.files).afterBundling(repoRoot, out)) {
      const r = spawnSync('bash', ['-c', command], { encoding: 'utf8' });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    }
    // The viewer's hashed names change with playwright-core: its stylesheet that loads a font, and the font.
    const viewer = join(repoRoot, page.files[0]);
    const css = readdirSync(viewer).find(
      (f) => f.endsWith('.css') && /url\([^)]*\.ttf\)/.test(readFileSync(join(viewer, f), 'utf8')),
    )!;
    const font = readdirSync(viewer).find((f) => f.endsWith('.ttf'))!;
    expect([css, font]).toEqual([expect.any(String), expect.any(String)]);
    writeFileSync(
      join(out, 'probe.mjs'),
      `import { handler } from './index.mjs';
const get = (proxy) => handler({ httpMethod: 'GET', path: '/trace-viewer/' + proxy, pathParameters: { proxy },
  headers: { host: 'abc123.execute-api.eu-west-1.amazonaws.com' }, requestContext: { stage: 'api' } });
const answers = {};
for (const p of ['index.html', 'sw.bundle.js', '${css}', '${font}', '..%2F..%2Findex.mjs', 'nope.js'])
  answers[p] = await get(p);
console.log(JSON.stringify(Object.fromEntries(Object.entries(answers).map(([p, a]) => [p, {
  status: a.statusCode, type: a.headers['content-type'], sw: a.headers['service-worker-allowed'] ?? null,
  base64: a.isBase64Encoded ?? false, length: a.body.length,
  title: /<title>([^<]*)<\\/title>/.exec(a.body)?.[1] ?? null,
  fontInlined: a.body.includes('url(data:font/ttf;base64,'), fontLinked: a.body.includes('${font}'),
}]))));`,
    );
    // Act: a fresh node, in a folder where no playwright-core can be resolved.
    const r = spawnSync(process.execPath, [join(out, 'probe.mjs')], { encoding: 'utf8', cwd: out });
    // Assess
    expect(r.stderr).toBe('');
    const a = JSON.parse(r.stdout) as Record<string, Json>;
    expect(a['index.html']).toMatchObject({
      status: 200,
      type: 'text/html; charset=utf-8',
      title: 'Playwright Trace Viewer',
    });
    expect(a['sw.bundle.js']).toMatchObject({
      status: 200,
      type: 'text/javascript; charset=utf-8',
      sw: '/api/trace-viewer/',
    });
    expect(a[css]).toMatchObject({
      status: 200,
      fontInlined: true,
      fontLinked: false,
    });
    expect(a[font]).toMatchObject({ status: 200, type: 'font/ttf', base64: true });
    expect(a['..%2F..%2Findex.mjs']).toMatchObject({ status: 404 });
    expect(a['nope.js']).toMatchObject({ status: 404 });
  }, 60_000);
});
