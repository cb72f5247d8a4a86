/**
 * The App's webhook deliveries in the GitHub fake (github.ts mounts them behind its App JWT check: each
 * App sees its own). Test support code, not product. The fake delivers nothing itself: a test records
 * each attempt with `record`.
 *
 * What it implements, and only that:
 * - `GET /app/hook/deliveries` → newest first, `per_page` (default 30, at most `pageSize`, 100 as on
 *   GitHub) and an opaque `cursor`, the next page's URL in a `Link: <…>; rel="next"` header; a cursor it
 *   did not give → 422.
 * - `POST /app/hook/deliveries/{id}/attempts` → 202, recorded in `redeliveryRequests` (an unknown id, or
 *   another App's → 404).
 * What it does not: `GET /app/hook/deliveries/{id}` (one delivery's payload), the App's hook config.
 */

/** One attempt at delivering a webhook, as GitHub lists it (`GET /app/hook/deliveries`). */
export interface FakeHookDelivery {
  id: number;
  guid: string;
  delivered_at: string;
  redelivery: boolean;
  duration: number;
  status: string;
  status_code: number;
  event: string;
  action: string | null;
  installation_id: number | null;
  repository_id: number | null;
}

/** What a test records: `statusCode` what the receiver answered (0: no answer); `deliveredAt` defaults to now. */
export interface DeliveryAttempt {
  guid: string;
  statusCode: number;
  event: string;
  action?: string;
  redelivery?: boolean;
  deliveredAt?: Date;
}

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

const notFound = (): Reply => ({
  status: 404,
  body: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' },
});

export class FakeHookDeliveries {
  /** The largest `per_page` the listing honours (100 on GitHub; tests lower it to page). */
  pageSize = 100;
  /** The attempt ids redelivery was asked for, in order. */
  readonly redeliveryRequests: number[] = [];
  /** Attempts by App id, in the order recorded. */
  private readonly byApp = new Map<string, FakeHookDelivery[]>();
  private nextId = 90_000_000_001;

  /** Record one attempt at delivering a webhook of an App (what GitHub lists afterwards); returns its id. */
  record(appId: string, d: DeliveryAttempt): number {
    const id = this.nextId++;
    const list = this.byApp.get(appId) ?? [];
    list.push({
      id,
      guid: d.guid,
      delivered_at: (d.deliveredAt ?? new Date()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      redelivery: d.redelivery ?? false,
      duration: 0.05,
      status:
        d.statusCode >= 200 && d.statusCode < 300
          ? 'OK'
          : d.statusCode
            ? 'Invalid HTTP Response'
            : 'timed out',
      status_code: d.statusCode,
      event: d.event,
      action: d.action ?? null,
      installation_id: null,
      repository_id: null,
    });
    this.byApp.set(appId, list);
    return id;
  }

  /** A request of App `appId` to the deliveries routes; `listUrl` the listing's own URL (for `Link`). */
  handle(appId: string, method: string, path: string, url: URL, listUrl: string): Reply {
    const all = [...(this.byApp.get(appId) ?? [])].sort(
      (a, b) => b.delivered_at.localeCompare(a.delivered_at) || b.id - a.id,
    );
    const redeliver = /^\/app\/hook\/deliveries\/(\d+)\/attempts$/.exec(path);
    if (redeliver && method === 'POST') {
      const id = Number(redeliver[1]);
      if (!all.some((d) => d.id === id)) return notFound();
      this.redeliveryRequests.push(id);
      return { status: 202, body: {} };
    }
    if (redeliver || method !== 'GET') return notFound();
    const perPage = Math.min(Number(url.searchParams.get('per_page') ?? 30) || 30, this.pageSize);
    // The cursor: how many attempts earlier pages held (opaque to clients, like GitHub's `v1_…`).
    const cursor = url.searchParams.get('cursor');
    const start = cursor ? Number(/^v1_(\d+)$/.exec(cursor)?.[1] ?? Number.NaN) : 0;
    if (!Number.isInteger(start)) return { status: 422, body: { message: 'Invalid cursor' } };
    const page = all.slice(start, start + perPage);
    if (start + perPage >= all.length) return { status: 200, body: page };
    const next = new URL(listUrl);
    next.searchParams.set('per_page', String(perPage));
    next.searchParams.set('cursor', `v1_${start + perPage}`);
    return { status: 200, body: page, headers: { link: `<${next.href}>; rel="next"` } };
  }
}
