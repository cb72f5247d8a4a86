import { describe, expect, test } from '@jest/globals';
import { table } from './format.js';
import { ENV_COLUMNS, environmentRows } from './views.js';

describe('envs list', () => {
  const envs = [0, 10, 20, 7, 8, 9].map((pr) => ({
    repoFullName: pr === 8 ? 'acme/api' : 'acme/web',
    prNumber: pr,
    status: pr === 9 ? 'failed' : 'ready',
    urls: (pr === 9 ? {} : { web: `http://127.0.0.1:4${pr}00` }) as Record<string, string>,
    error: pr === 9 ? 'app web: build failed (exit code 1)' : undefined,
    updatedAt: '2030-01-02T03:04:05.678Z',
    lastDeployedSha: 'abcdef0123456789abcdef',
  }));

  test('by repository, then PR number as a number; filters by repository and status', () => {
    const prs = (rows: { repoFullName: string; prNumber: number }[]) =>
      rows.map((e) => `${e.repoFullName}#${e.prNumber}`);
    expect(prs(environmentRows(envs, {}))).toEqual([
      'acme/api#8',
      'acme/web#0',
      'acme/web#7',
      'acme/web#9',
      'acme/web#10',
      'acme/web#20',
    ]);
    expect(prs(environmentRows(envs, { repo: 'ACME/web', status: 'ready' }))).toEqual([
      'acme/web#0',
      'acme/web#7',
      'acme/web#10',
      'acme/web#20',
    ]);
  });

  test('a table: aligned columns, numbers to the right, the cause of a failure, short commits', () => {
    const text = table(environmentRows(envs, { repo: 'acme/web' }).slice(0, 3), ENV_COLUMNS, 'none');
    expect(text.split('\n')).toEqual([
      'REPOSITORY  PR  STATUS  PHASE  COMMIT        UPDATED              APPS / ERROR',
      'acme/web     0  ready   -      abcdef012345  2030-01-02 03:04:05  web http://127.0.0.1:4000',
      'acme/web     7  ready   -      abcdef012345  2030-01-02 03:04:05  web http://127.0.0.1:4700',
      'acme/web     9  failed  -      abcdef012345  2030-01-02 03:04:05  app web: build failed (exit code 1)',
    ]);
    expect(table([], ENV_COLUMNS, 'no environments')).toBe('no environments');
  });
});
