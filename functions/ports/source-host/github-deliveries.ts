import type { AppClient } from './github-app-secret.js';
import type { GitHubCalls } from './github-calls.js';
import type { HookDelivery, WebhookDeliveries } from './port.js';

/*
 * The App's webhook deliveries (the WebhookDeliveries port), as the App (its JWT):
 *   recent     GET  /app/hook/deliveries?per_page=100[&cursor=…]   newest first, the next page's cursor in
 *                                                                  the Link header
 *   redeliver  POST /app/hook/deliveries/{id}/attempts             202
 */

/** Pages of webhook deliveries read per listing at most (100 each), whatever `since` says. */
const MAX_DELIVERY_PAGES = 30;

/** The `cursor` of the Link header's `rel="next"` URL (GitHub's cursor pagination), if any. */
export function nextCursor(link: string | undefined): string | undefined {
  for (const part of (link ?? '').split(',')) {
    const m = /<([^>]+)>\s*;\s*rel="?next"?/.exec(part);
    if (!m) continue;
    try {
      return new URL(m[1]!).searchParams.get('cursor') ?? undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * The App's webhook deliveries, with the source host's retries and error mapping (`github`). A 404 on the
 * listing (the App has no webhook) lists nothing.
 */
export function appWebhookDeliveries(app: () => Promise<AppClient>, github: GitHubCalls): WebhookDeliveries {
  return {
    recent: (since) => recentDeliveries(app, github, since),
    redeliver: async (id) => {
      const client = await app();
      await github.call(
        `asking GitHub to redeliver webhook delivery ${id}`,
        () => client.octokit.request('POST /app/hook/deliveries/{delivery_id}/attempts', { delivery_id: id }),
        [],
        'app',
      );
    },
  };
}

async function* recentDeliveries(
  app: () => Promise<AppClient>,
  github: GitHubCalls,
  since: Date,
): AsyncGenerator<HookDelivery> {
  const client = await app();
  let cursor: string | undefined;
  for (let page = 1; page <= MAX_DELIVERY_PAGES; page++) {
    const r = await github.call(
      "listing the App's webhook deliveries",
      () =>
        client.octokit.request('GET /app/hook/deliveries', { per_page: 100, ...(cursor ? { cursor } : {}) }),
      [404],
      'app',
    );
    if (!r.found) return;
    let older = false;
    for (const d of r.value.data) {
      const delivery: HookDelivery = {
        id: Number(d.id),
        guid: d.guid,
        deliveredAt: d.delivered_at,
        redelivery: d.redelivery === true,
        statusCode: typeof d.status_code === 'number' ? d.status_code : 0,
        event: d.event,
        ...(d.action ? { action: d.action } : {}),
      };
      if (Date.parse(delivery.deliveredAt) < since.getTime()) older = true;
      yield delivery;
    }
    cursor = nextCursor(r.value.headers.link);
    if (older || !cursor || r.value.data.length === 0) return;
  }
}
