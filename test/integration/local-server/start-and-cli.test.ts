import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { bearer, call, client } from '../../support/api.js';
import { previewctl, startProcess, stopProcess } from '../../support/process.js';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'preview-start-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('npm start', () => {
  test('first start writes credentials (0600); data and credentials survive a SIGTERM restart', async () => {
    const dataDir = tempDir();
    const first = await startProcess(dataDir);
    const credsPath = join(dataDir, 'credentials.json');
    expect(statSync(credsPath).mode & 0o777).toBe(0o600);
    const creds = JSON.parse(readFileSync(credsPath, 'utf8'));
    expect(Object.keys(creds).sort()).toEqual(['apiKey', 'clientId', 'clientSecret', 'orgId']);
    expect(first.stderr()).toContain(credsPath);
    expect((await call({ url: first.url }, 'GET', '/healthz')).status).toBe(200);
    // The database is not on the loopback network sandboxed apps share: a socket in the private data dir.
    const info = JSON.parse(readFileSync(join(dataDir, 'server.json'), 'utf8'));
    expect(info.dynamodbEndpoint).toBe(`unix:${join(dataDir, 'dynamodb.sock')}`);
    expect(
      (await previewctl(dataDir, 'apps', 'create', '--org', creds.orgId, '--repo', 'acme/web')).code,
    ).toBe(0);
    const deploy = await call({ url: first.url }, 'POST', '/v1/preview/environments', {
      body: { repoFullName: 'acme/web', prNumber: 3, headSha: 'abcdef1', headRef: 'x' },
      headers: bearer(creds),
    });
    expect(deploy.status).toBe(202);
    expect(await stopProcess(first.proc, 'SIGTERM')).toBe(0);

    const second = await startProcess(dataDir);
    expect(JSON.parse(readFileSync(credsPath, 'utf8'))).toEqual(creds);
    const status = await call({ url: second.url }, 'GET', '/v1/preview/environments/acme/web/3', {
      headers: bearer(creds),
    });
    expect(status.status).toBe(200);
    expect(status.body.repoFullName).toBe('acme/web');
    expect(await stopProcess(second.proc, 'SIGINT')).toBe(0);
  }, 90_000);
});

describe('previewctl', () => {
  test('acts on the running server’s data: org, linked app, imported tests', async () => {
    const dataDir = tempDir();
    const server = await startProcess(dataDir);
    try {
      const org = await previewctl(dataDir, 'orgs', 'create', '--name', 'acme');
      expect(org.code).toBe(0);
      expect(Object.keys(org.out).sort()).toEqual(['apiKey', 'clientId', 'clientSecret', 'orgId']);
      const app = await previewctl(dataDir, 'apps', 'create', '--org', org.out.orgId, '--repo', 'acme/web');
      expect(app.code).toBe(0);
      expect(app.out.applicationId).toMatch(/^[a-z0-9]{20,}$/);
      const list = await call(
        { url: server.url },
        'GET',
        `/v1/preview/secrets/${app.out.applicationId}/web`,
        {
          headers: bearer(org.out),
        },
      );
      expect(list.status).toBe(200);
      expect(list.body.keys).toEqual([]);

      writeFileSync(
        join(dataDir, 'tests.json'),
        JSON.stringify([
          {
            name: 'login works',
            folder: { id: 'f1', name: 'Smoke' },
            application_version: { name: 'v1', path: '/app' },
            variables: { EMAIL: 'a@example.com' },
            steps: [
              {
                instruction: 'Type {{variable:EMAIL}}',
                interaction: 'input-text',
                url: 'https://app.example.com/login',
                element: { html: '<input>', selector: '#email' },
              },
            ],
          },
        ]),
      );
      const imported = await previewctl(dataDir, 'tests', 'import', '--org', org.out.orgId, 'tests.json');
      expect(imported.code).toBe(0);
      expect(imported.out.tests).toEqual([{ id: expect.any(String), name: 'login works' }]);
      const testRes = await call({ url: server.url }, 'GET', `/test/${imported.out.tests[0].id}`, {
        headers: client(org.out),
      });
      expect(testRes.status).toBe(200);
      expect(testRes.body.name).toBe('login works');
    } finally {
      await stopProcess(server.proc, 'SIGTERM');
    }
  }, 90_000);

  test('works without a running server, and reports bad input as JSON errors', async () => {
    const dataDir = tempDir();
    const org = await previewctl(dataDir, 'orgs', 'create', '--name', 'solo');
    expect(org.code).toBe(0);
    const unlinked = await previewctl(dataDir, 'apps', 'create', '--org', org.out.orgId);
    expect(unlinked.code).toBe(0);
    const flags = await previewctl(
      dataDir,
      'apps',
      'create',
      '--org',
      org.out.orgId,
      '--repo',
      'a/b',
      '--disabled',
      '--no-installation',
    );
    expect(flags.code).toBe(0);
    expect(await previewctl(dataDir, 'apps', 'create', '--org', 'nope')).toEqual({
      code: 2,
      out: { error: 'organization nope not found' },
    });
    expect(
      (await previewctl(dataDir, 'apps', 'create', '--org', org.out.orgId, '--repo', 'bad')).out,
    ).toEqual({
      error: '--repo must be owner/repo',
    });
    expect((await previewctl(dataDir, 'frobnicate')).code).toBe(2);
  }, 60_000);
});
