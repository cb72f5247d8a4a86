import type { HookDelivery, WebhookDeliveries } from './port.js';

/**
 * The WebhookDeliveries port locally: there is no GitHub App, so no delivery was ever made from outside
 * (`previewctl events put` and signed POSTs to the local webhook route are answered at once). Lists
 * nothing; a redelivery request names a delivery that does not exist.
 */
export class NoWebhookDeliveries implements WebhookDeliveries {
  async *recent(_since: Date): AsyncGenerator<HookDelivery> {}

  async redeliver(id: number): Promise<void> {
    throw new Error(`no webhook delivery ${id}: locally there is no GitHub App to redeliver it`);
  }
}
