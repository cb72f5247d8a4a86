import { beforeEach, describe, expect, test } from '@jest/globals';
import { nextCursor } from '../../ports/source-host/github-deliveries.js';
import { NoWebhookDeliveries } from '../../ports/source-host/local-deliveries.js';
import type { HookDelivery, WebhookDeliveries } from '../../ports/source-host/port.js';
import { setLogSink } from '../../shared/log.js';
import { MAX_REDELIVERIES, redeliverFailedDeliveries } from './redelivery.js';

/*
 * The redelivery of failed webhook deliveries (core/github/redelivery.ts), with a fake of the
 * WebhookDeliveries port and the claim lookup injected (the unit tier has no DynamoDB; the cloud tier
 * runs it against the real table).
 */

const NOW = new Date('2030-06-01T12:00:00Z');
const minutesAgo = (m: number) => new Date(NOW.getTime() - m * 60_000).toISOString();

let nextId = 1;
const attempt = (guid: string, ago: number, statusCode: number, redelivery = false): HookDelivery => ({
  id: nextId++,
  guid,
  deliveredAt: minutesAgo(ago),
  redelivery,
  statusCode,
  event: 'pull_request',
  action: 'opened',
});

/** The port, over attempts given newest first; records the redeliveries and how many attempts were read. */
class FakeDeliveries implements WebhookDeliveries {
  readonly redelivered: number[] = [];
  read = 0;
  constructor(private readonly attempts: HookDelivery[]) {}
  async *recent(): AsyncGenerator<HookDelivery> {
    for (const a of this.attempts) {
      this.read++;
      yield a;
    }
  }
  async redeliver(id: number): Promise<void> {
    this.redelivered.push(id);
  }
}

const logs: string[] = [];
setLogSink((line) => logs.push(line));
beforeEach(() => {
  logs.length = 0;
});

const run = (deliveries: FakeDeliveries, claimed: string[] = [], over: object = {}) =>
  redeliverFailedDeliveries({ deliveries, claimed: async (g) => claimed.includes(g), ...over }, NOW);

describe('redeliverFailedDeliveries', () => {
  test('a failed delivery without a claim is redelivered (its latest attempt)', async () => {
    const first = attempt('g-1', 30, 502);
    const again = attempt('g-1', 10, 503, true);
    const fake = new FakeDeliveries([again, first]);
    expect(await run(fake)).toEqual({ checked: 1, redelivered: 1, gaveUp: 0 });
    expect(fake.redelivered).toEqual([again.id]);
  });

  test('a delivery that one attempt delivered (2xx) is left alone', async () => {
    const fake = new FakeDeliveries([attempt('g-2', 5, 202, true), attempt('g-2', 20, 500)]);
    expect(await run(fake)).toEqual({ checked: 1, redelivered: 0, gaveUp: 0 });
    expect(fake.redelivered).toEqual([]);
  });

  test('a delivery we refused with a 4xx (a bad signature, a bad payload) is not asked again', async () => {
    const throttled = attempt('g-429', 7, 429);
    const fake = new FakeDeliveries([attempt('g-401', 5, 401), attempt('g-400', 6, 400), throttled]);
    expect(await run(fake)).toEqual({ checked: 3, redelivered: 1, gaveUp: 0 });
    expect(fake.redelivered).toEqual([throttled.id]); // a 429 may pass another time
  });

  test('a failed delivery we claimed (we acted on it: GitHub timed out, say) is left alone', async () => {
    const fake = new FakeDeliveries([attempt('g-3', 5, 0)]);
    expect(await run(fake, ['g-3'])).toEqual({ checked: 1, redelivered: 0, gaveUp: 0 });
    expect(fake.redelivered).toEqual([]);
  });

  test(`after ${MAX_REDELIVERIES} redeliveries a delivery is given up, with a warning naming it`, async () => {
    const attempts = [
      ...Array.from({ length: MAX_REDELIVERIES }, (_, i) => attempt('g-4', 10 + i, 500, true)),
      attempt('g-4', 60, 500),
    ];
    const fake = new FakeDeliveries(attempts);
    expect(await run(fake)).toEqual({ checked: 1, redelivered: 0, gaveUp: 1 });
    expect(fake.redelivered).toEqual([]);
    const warning = logs.find((l) => l.includes('given up'));
    expect(warning).toContain('g-4');
    // One redelivery fewer: asked again.
    const fewer = new FakeDeliveries(attempts.slice(1));
    expect(await run(fewer)).toEqual({ checked: 1, redelivered: 1, gaveUp: 0 });
  });

  test('only the window is read: the listing stops at the first older attempt', async () => {
    const inside = attempt('g-5', 23 * 60, 500);
    const older = [attempt('g-6', 25 * 60, 500), attempt('g-7', 26 * 60, 500), attempt('g-8', 27 * 60, 500)];
    const fake = new FakeDeliveries([inside, ...older]);
    expect(await run(fake)).toEqual({ checked: 1, redelivered: 1, gaveUp: 0 });
    expect(fake.redelivered).toEqual([inside.id]);
    expect(fake.read).toBe(2);
  });

  test('at most maxPerRun redeliveries per run, newest first', async () => {
    const attempts = Array.from({ length: 5 }, (_, i) => attempt(`g-b${i}`, i + 1, 500));
    const fake = new FakeDeliveries(attempts);
    const claims: string[] = [];
    const out = await redeliverFailedDeliveries(
      {
        deliveries: fake,
        claimed: async (g) => {
          claims.push(g);
          return false;
        },
        maxPerRun: 2,
      },
      NOW,
    );
    expect(out).toEqual({ checked: 5, redelivered: 2, gaveUp: 0 });
    expect(fake.redelivered).toEqual([attempts[0]!.id, attempts[1]!.id]);
    // The rest wait for the next run, their claim lookups too.
    expect(claims).toEqual(['g-b0', 'g-b1']);
  });

  test('logs carry ids and counts, never payloads', async () => {
    const fake = new FakeDeliveries([attempt('g-9', 1, 500)]);
    await run(fake);
    expect(logs.join('\n')).toContain('g-9');
    expect(logs.join('\n')).not.toMatch(/payload|pull_request"?:\s*\{/);
  });
});

describe("GitHub's cursor pagination (the Link header)", () => {
  test("the next page's cursor, else none", () => {
    const link =
      '<https://api.github.com/app/hook/deliveries?per_page=100&cursor=v1_12077215967>; rel="next", ' +
      '<https://api.github.com/app/hook/deliveries?per_page=100>; rel="first"';
    expect(nextCursor(link)).toBe('v1_12077215967');
    expect(nextCursor('<https://api.github.com/app/hook/deliveries?per_page=100>; rel="first"')).toBe(
      undefined,
    );
    expect(nextCursor(undefined)).toBe(undefined);
  });
});

describe('locally (no GitHub App)', () => {
  test('there is nothing to redeliver', async () => {
    expect(await redeliverFailedDeliveries({ deliveries: new NoWebhookDeliveries() }, NOW)).toEqual({
      checked: 0,
      redelivered: 0,
      gaveUp: 0,
    });
  });
});
