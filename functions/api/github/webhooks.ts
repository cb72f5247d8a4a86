import * as z from 'zod/mini';
import { receiveWebhook } from '../../core/github/index.js';
import { eventBus } from '../../ports/registry/events.js';
import { sourceHost } from '../../ports/registry/source-host.js';
import { webhookSecret } from '../../ports/registry/webhook-secret.js';
import { config } from '../../shared/config.js';
import { route } from '../route.js';

/**
 * POST /v1/github/webhooks: a GitHub App webhook delivery. The signature (`X-Hub-Signature-256` over the
 * raw body) is checked before the body is parsed (401 when missing or wrong); then the delivery becomes
 * events on the service's bus and the answer is 202 at once: `{"accepted": true, ...}`, or
 * `{"ignored": "<reason>"}` for a delivery that changes no preview (a redelivery among them).
 */
export const { main, handler } = route(
  'githubWebhook',
  { body: z.unknown(), bodyRequired: true, webhookSecret: () => webhookSecret().current() },
  async (req) => {
    const outcome = await receiveWebhook(
      { bus: eventBus(), sourceHost: sourceHost(), checkInstallation: config().mode === 'aws' },
      {
        event: req.headers['x-github-event'],
        deliveryId: req.headers['x-github-delivery'],
        payload: req.body,
      },
    );
    return { statusCode: 202, body: outcome };
  },
);
