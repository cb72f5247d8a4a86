import type { Runtime } from '../runtime/port.js';
import { adapter } from './adapters.js';

/**
 * The runtime as a test run wakes its preview with (issue 29): locally the one local runtime (`wake`);
 * in AWS nothing to do (KEDA's HTTP add-on wakes an app on the request itself and holds it meanwhile), so
 * the run executor's bundle carries no cluster client. Locally also `serviceUrls`: the apps' own ports,
 * which the run's factory calls use (in AWS the public URLs, with the access cookie).
 */
export const wakeRuntime = /* @__PURE__ */ adapter<
  'runtime',
  Required<Pick<Runtime, 'wake'>> & Pick<Runtime, 'serviceUrls'>
>('runtime', () => ({ wake: async () => undefined }));
