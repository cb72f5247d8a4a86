import type { FrontDoor } from '../../runtime/port.js';
import { adapter } from '../adapters.js';

/**
 * The `FrontDoor` role, for the test-run executor: locally the one local runtime (`wake` a preview that
 * fell asleep; `serviceUrls`, the apps' own ports, which a run's factory calls use). In AWS there is no
 * door of the runtime's own: KEDA's HTTP add-on wakes an app on the request itself and holds it
 * meanwhile, and the service reaches apps at their public URLs (with the access cookie), so `wake`
 * resolves at once and the executor's bundle carries no cluster client.
 */
export const frontDoor = /* @__PURE__ */ adapter<'runtime', FrontDoor>('runtime', () => ({
  wake: async () => undefined,
}));
