import { adapter } from './adapters.js';
import { githubAppSourceHost } from './source-host.js';

/** The GitHub App's webhook deliveries (listed and redelivered as the App). */
export const webhookDeliveries = /* @__PURE__ */ adapter('webhookDeliveries', () =>
  githubAppSourceHost().webhookDeliveries(),
);
