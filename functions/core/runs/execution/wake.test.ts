import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from '@jest/globals';
import { neededApps, PreviewNotAwake, wakePreview } from './wake.js';

/*
 * Waking a run's preview before its first step: apps asked at loopback servers that answer as a gateway
 * and KEDA's interceptor do while an app scales from zero (503, 504), then as the app.
 */

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A server answering `statuses` in turn (the last one from then on), recording each request's cookie. */
async function app(statuses: number[], cookies: (string | undefined)[] = []): Promise<string> {
  let n = 0;
  const server = createServer((req, res) => {
    cookies.push(req.headers.cookie);
    res.writeHead(statuses[Math.min(n++, statuses.length - 1)]!).end('x');
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const base = { orgId: 'o1', envKey: 'acme/shop#7', setting: 'PREVIEW_WAKE_TIMEOUT_SECONDS' };

describe('wakePreview', () => {
  test('waits through 503 and 504 until each app answers; records when each did', async () => {
    const web = await app([503, 504, 503, 200]);
    const api = await app([302]);
    const out = await wakePreview({ askEveryMs: 20 }, { ...base, urls: { web, api }, timeoutMs: 5_000 });
    expect(Object.keys(out.wake.apps).sort()).toEqual(['api', 'web']);
    expect(out.wake.apps.web).toBeGreaterThanOrEqual(60);
    expect(out.wake.waitedMs).toBeGreaterThanOrEqual(out.wake.apps.web!);
  });

  test("an app's own 500 or 404 is an answer (the app is up), not a wait", async () => {
    const web = await app([500]);
    const api = await app([404]);
    const out = await wakePreview({}, { ...base, urls: { web, api }, timeoutMs: 2_000 });
    expect(out.wake.waitedMs).toBeLessThan(1_000);
  });

  test('never answers: PreviewNotAwake naming the environment, the bound, the app and what it said', async () => {
    const web = await app([200]);
    const api = await app([503]);
    const err = await wakePreview({ askEveryMs: 20 }, { ...base, urls: { web, api }, timeoutMs: 300 }).catch(
      (e) => e,
    );
    expect(err).toBeInstanceOf(PreviewNotAwake);
    expect(err.message).toBe(
      'the preview environment acme/shop#7 did not wake within 0.3 s (PREVIEW_WAKE_TIMEOUT_SECONDS): ' +
        'app api never answered (last: 503)',
    );
  });

  test("a closed port says so; the runtime's own wake is bounded too", async () => {
    const closed = await app([200]);
    await new Promise((r) => servers.pop()!.close(r));
    const err = await wakePreview(
      { askEveryMs: 20 },
      { ...base, urls: { web: closed }, timeoutMs: 200 },
    ).catch((e) => e);
    expect(err.message).toMatch(/app web never answered \(last: ECONNREFUSED\)$/);
    const never = await wakePreview(
      { wake: () => new Promise(() => undefined) },
      { ...base, urls: {}, timeoutMs: 100 },
    ).catch((e) => e);
    expect(never).toBeInstanceOf(PreviewNotAwake);
    expect(never.message).toBe(
      'the preview environment acme/shop#7 did not wake within 0.1 s (PREVIEW_WAKE_TIMEOUT_SECONDS)',
    );
    const failed = await wakePreview(
      { wake: async () => Promise.reject(new Error('app web exited (exit code 1) while waking')) },
      { ...base, urls: {}, timeoutMs: 1_000 },
    ).catch((e) => e);
    expect(failed.message).toBe(
      'the preview environment acme/shop#7 could not be woken: app web exited (exit code 1) while waking',
    );
  });

  test("the runtime's wake first, then its service addresses; the access cookie only to its origin", async () => {
    const seen: (string | undefined)[] = [];
    const own = await app([200], seen);
    const other: (string | undefined)[] = [];
    const api = await app([200], other);
    const order: string[] = [];
    const out = await wakePreview(
      {
        wake: async () => {
          order.push('wake');
        },
      },
      {
        ...base,
        urls: { web: 'http://web.example.invalid', api },
        serviceUrls: async () => {
          order.push('serviceUrls');
          return { web: own };
        },
        access: [{ url: api, cookie: { name: 'preview_access', value: 'tok' } }],
        timeoutMs: 2_000,
      },
    );
    expect(order).toEqual(['wake', 'serviceUrls']);
    expect(out.serviceUrls).toEqual({ web: own });
    expect(seen).toEqual([undefined]);
    expect(other).toEqual(['preview_access=tok']);
  });
});

describe('neededApps', () => {
  const target = {
    url: 'http://web.example/start',
    appUrl: 'http://web.example',
    applicationId: 'a1',
    apps: ['api', 'factory', 'web'],
    urls: { web: 'http://web.example', api: 'http://api.example', factory: 'http://factory.example' },
    factory: { app: 'factory', path: '/factory' },
  };

  test("a run needs the app its first page is on, not the preview's other apps", () => {
    expect(neededApps(target, false)).toEqual({ web: 'http://web.example' });
  });

  test("a run with a scenario needs the Environment Factory's app too", () => {
    expect(neededApps(target, true)).toEqual({
      web: 'http://web.example',
      factory: 'http://factory.example',
    });
  });
});
