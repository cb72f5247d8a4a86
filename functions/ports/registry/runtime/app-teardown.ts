import { config } from '../../../shared/config.js';
import { cloudAppTeardown } from '../../runtime/cloud.js';
import { connectionOptions, EksConnection } from '../../runtime/eks/connection.js';
import { EksTeardown } from '../../runtime/eks/teardown.js';
import type { AppTeardown } from '../../runtime/port.js';
import { adapter } from '../adapters.js';

/**
 * The `AppTeardown` role, for MarkFailed (`stopApps`), TearDown (`teardown`) and the expiry sweep
 * (`pruneFences`). AWS: `EksTeardown` over its own connection (list and delete the environment's
 * Deployments, its namespace behind a fence, stale fences; not the deploy, the watch or the Lambda
 * client), nothing to stop or remove without a cluster. Local: the one local runtime.
 */
export const appTeardown = /* @__PURE__ */ adapter<'runtime', AppTeardown>('runtime', () =>
  cloudAppTeardown(
    config().eks.clusterName ? new EksTeardown(new EksConnection(connectionOptions())) : undefined,
  ),
);
