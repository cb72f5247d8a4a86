import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, test } from '@jest/globals';
import { localDynamoClientConfig } from '../../../functions/shared/aws/dynamo.js';
import { bearer, call } from '../../support/api.js';
import { previewctl, startProcess, startToExit, stopProcess } from '../../support/process.js';

/* One server per data dir: a second `npm start` there is refused and changes nothing. */

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'preview-lock-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * The inode and times of what a start writes at the data dir's top level (a second start used to replace
 * the socket and server.json), and the list of entries.
 */
function snapshot(dataDir: string): Record<string, string> {
  const out: Record<string, string> = { entries: readdirSync(dataDir).sort().join(' ') };
  for (const name of [
    'dynamodb.sock',
    'server.json',
    'lock.json',
    'credentials.json',
    'github-webhook-secret',
  ]) {
    const s = statSync(join(dataDir, name));
    out[name] = `${s.ino}:${s.ctimeMs}:${s.mtimeMs}`;
  }
  return out;
}

describe('one server per data dir', () => {
  test('a second npm start exits 1 at once naming the first, touches nothing; the first keeps serving', async () => {
    const dataDir = tempDir();
    const first = await startProcess(dataDir);
    try {
      const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
      expect((await previewctl(dataDir, 'apps', 'create', '--repo', 'acme/web')).code).toBe(0);
      const pid = first.proc.pid;
      const port = new URL(first.url).port;
      const before = snapshot(dataDir);

      const second = await startToExit({ PORT: '0', PREVIEW_DATA_DIR: dataDir });
      expect(second.code).toBe(1);
      expect(second.stderr.trim()).toBe(
        `data dir ${dataDir} is in use by npm start (pid ${pid}, port ${port}); stop it first, ` +
          'or set PREVIEW_DATA_DIR to another directory',
      );
      expect(snapshot(dataDir)).toEqual(before);

      // The first server still answers, from its database: over HTTP and through the CLI.
      const deploy = await call({ url: first.url }, 'POST', '/v1/preview/environments', {
        body: { repoFullName: 'acme/web', prNumber: 3, headSha: 'abcdef1', headRef: 'x' },
        headers: bearer(creds),
      });
      expect(deploy.status).toBe(202);
      const list = await previewctl(dataDir, 'envs', 'list');
      expect(list.code).toBe(0);
      expect(list.out.environments.map((e: { prNumber: number }) => e.prNumber)).toEqual([3]);
      // An admin command (it opens the database itself when no server runs) goes through the server's.
      expect((await previewctl(dataDir, 'apps', 'create', '--repo', 'acme/api')).code).toBe(0);
      expect((await call({ url: first.url }, 'GET', '/healthz')).status).toBe(200);
    } finally {
      expect(await stopProcess(first.proc, 'SIGTERM')).toBe(0);
    }
    // A clean stop gives the data dir up.
    expect(readdirSync(dataDir)).not.toContain('lock.json');
  }, 120_000);

  test('the lock of a killed server is taken over; its data is all there', async () => {
    const dataDir = tempDir();
    const first = await startProcess(dataDir);
    expect((await previewctl(dataDir, 'apps', 'create', '--repo', 'acme/web')).code).toBe(0);
    expect(await stopProcess(first.proc, 'SIGKILL')).toBe(null);
    expect(JSON.parse(readFileSync(join(dataDir, 'lock.json'), 'utf8')).pid).toBe(first.proc.pid);

    const second = await startProcess(dataDir);
    try {
      expect(JSON.parse(readFileSync(join(dataDir, 'lock.json'), 'utf8'))).toMatchObject({
        pid: second.proc.pid,
        by: 'npm start',
        port: Number(new URL(second.url).port),
      });
      const apps = await previewctl(dataDir, 'apps', 'list');
      expect(apps.out.applications.map((a: { repoFullName: string }) => a.repoFullName)).toEqual([
        'acme/web',
      ]);
    } finally {
      await stopProcess(second.proc, 'SIGTERM');
    }
  }, 120_000);

  test("an admin command through the running server's database leaves its tables' schema to it", async () => {
    const dataDir = tempDir();
    const server = await startProcess(dataDir);
    const endpoint = JSON.parse(readFileSync(join(dataDir, 'server.json'), 'utf8')).dynamodbEndpoint;
    const client = new DynamoDBClient({ region: 'local', ...localDynamoClientConfig(endpoint) });
    try {
      // The server's tests table as an older server made it (no byOrg index), as after an upgrade of the
      // checkout while the server runs.
      await client.send(new DeleteTableCommand({ TableName: 'preview-tests' }));
      await client.send(
        new CreateTableCommand({
          TableName: 'preview-tests',
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [{ AttributeName: 'testId', AttributeType: 'S' }],
          KeySchema: [{ AttributeName: 'testId', KeyType: 'HASH' }],
        }),
      );
      const before = (await client.send(new DescribeTableCommand({ TableName: 'preview-tests' }))).Table;
      expect((await previewctl(dataDir, 'apps', 'create', '--repo', 'acme/web')).code).toBe(0);
      const after = (await client.send(new DescribeTableCommand({ TableName: 'preview-tests' }))).Table;
      // Not rebuilt (with its new index) under the running server: the same table, still without it.
      expect(after?.CreationDateTime).toEqual(before?.CreationDateTime);
      expect(after?.GlobalSecondaryIndexes).toBeUndefined();
      expect(server.stderr()).not.toContain('rebuilt');
    } finally {
      client.destroy();
      await stopProcess(server.proc, 'SIGTERM');
    }
  }, 90_000);

  test('a data dir a previewctl command holds is refused too, naming it', async () => {
    const dataDir = tempDir();
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      writeFileSync(
        join(dataDir, 'lock.json'),
        JSON.stringify({
          pid: holder.pid,
          by: 'previewctl',
          port: null,
          startedAt: new Date().toISOString(),
        }),
      );
      const refused = await startToExit({ PORT: '0', PREVIEW_DATA_DIR: dataDir });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`data dir ${dataDir} is in use by previewctl (pid ${holder.pid});`);
      expect(readdirSync(dataDir)).toEqual(['lock.json']);
    } finally {
      holder.kill('SIGKILL');
    }
  }, 60_000);
});
