import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { checkArgs } from './api-commands.js';
import { parseCommandLine } from './args.js';
import { redeployAll } from './redeploy-all.js';

/*
 * `envs redeploy --all` against a loopback API: what it lists, what it redeploys, what it says per
 * environment, a 429 waited out, a refusal counted as a failure.
 */

const envs = [
  { repoFullName: 'acme/web', prNumber: 10, status: 'ready', urls: {} },
  { repoFullName: 'acme/web', prNumber: 7, status: 'ready', phase: 'asleep', urls: {} },
  { repoFullName: 'acme/web', prNumber: 8, status: 'deploying', urls: {} },
  { repoFullName: 'acme/web', prNumber: 9, status: 'torn_down', urls: {} },
  { repoFullName: 'acme/api', prNumber: 3, status: 'failed', urls: {} },
  { repoFullName: 'acme/api', prNumber: 4, status: 'ready', urls: {} },
];
const patched: string[] = [];
/** PATCH answers per path, in turn (the last from then on); default 202. */
const answers: Record<string, number[]> = {};
let server: Server;
let url: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/v1/preview/environments') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ environments: envs }));
    }
    if (req.method === 'PATCH') {
      patched.push(req.url!);
      const queue = answers[req.url!] ?? [202];
      const status = queue.length > 1 ? queue.shift()! : queue[0]!;
      res.writeHead(status, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(status === 202 ? { status: 'pending' } : { error: `said ${status}` }));
    }
    res.writeHead(404).end('{"error":"not found"}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((r) => server.close(r)));

type Wait = Parameters<typeof redeployAll>[1]['wait'];
const run = (args: string[], wait: Wait = async () => ({ result: { status: 'ready' }, code: 0 })) => {
  const p = parseCommandLine(['envs', 'redeploy', ...args]);
  checkArgs(p);
  return redeployAll(p, {
    target: { url, credentials: { apiKey: 'k' } } as Parameters<typeof redeployAll>[1]['target'],
    wait,
    busyPauseMs: 10,
  });
};

describe('envs redeploy --all', () => {
  test('--dry-run lists the live ones and skips the others, redeploying nothing', async () => {
    patched.length = 0;
    const out = await run(['--all', '--dry-run']);
    expect(out.text).toBe(
      [
        'acme/api#3   skipped: failed, not live',
        'acme/api#4   would redeploy',
        'acme/web#7   would redeploy',
        'acme/web#8   skipped: deploying, not live',
        'acme/web#10  would redeploy',
      ].join('\n'),
    );
    expect(out.code).toBe(0);
    expect(patched).toEqual([]);
  });

  test('redeploys each ready one (a 429 waited out); a refusal is its line and exit 1', async () => {
    patched.length = 0;
    answers['/v1/preview/environments/acme/web/7'] = [429, 429, 202];
    answers['/v1/preview/environments/acme/web/10'] = [409];
    const out = await run(['--all']);
    expect(out.text).toBe(
      [
        'acme/api#3   skipped: failed, not live',
        'acme/api#4   redeploying',
        'acme/web#7   redeploying',
        'acme/web#8   skipped: deploying, not live',
        'acme/web#10  refused: 409 said 409',
      ].join('\n'),
    );
    expect(out.code).toBe(1);
    expect(patched).toEqual([
      '/v1/preview/environments/acme/api/4',
      '/v1/preview/environments/acme/web/7',
      '/v1/preview/environments/acme/web/7',
      '/v1/preview/environments/acme/web/7',
      '/v1/preview/environments/acme/web/10',
    ]);
    delete answers['/v1/preview/environments/acme/web/10'];
  });

  test('--repo narrows it; --wait waits for each before the next and says how it ended', async () => {
    patched.length = 0;
    const waited: string[] = [];
    const out = await run(['--all', '--repo', 'acme/api', '--wait'], async (e: { label: string }) => {
      waited.push(`${e.label} after ${patched.length} patch(es)`);
      return { result: { status: 'failed', error: 'app api exited' }, code: 1 };
    });
    expect(out.text).toBe(
      ['acme/api#3  skipped: failed, not live', 'acme/api#4  redeployed: failed (app api exited)'].join('\n'),
    );
    expect(waited).toEqual(['acme/api#4 after 1 patch(es)']);
    expect(out.code).toBe(1);
    expect(out.result).toEqual({
      dryRun: false,
      environments: [
        { environment: 'acme/api#3', outcome: 'skipped: failed, not live' },
        { environment: 'acme/api#4', outcome: 'redeployed: failed (app api exited)' },
      ],
    });
  });

  test('usage: --all takes no --pr; --dry-run only with --all', () => {
    const check = (args: string[]) => () => checkArgs(parseCommandLine(['envs', 'redeploy', ...args]));
    expect(check(['--all', '--pr', '3'])).toThrow('envs redeploy --all takes no --pr (--repo narrows it)');
    expect(check(['--repo', 'acme/web', '--pr', '3', '--dry-run'])).toThrow(
      '--dry-run goes with envs redeploy --all',
    );
    expect(check(['--all', '--repo', 'nope'])).toThrow('--repo must be owner/repo');
    expect(check(['--repo', 'acme/web'])).toThrow('envs redeploy needs --pr N');
  });
});
