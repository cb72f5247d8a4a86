/**
 * The registry: which adapter serves which port, chosen by `PREVIEW_MODE` and nothing else (the mechanism:
 * registry/adapters.ts). One module per port under registry/ holds its getter; this file re-exports them
 * all for the local host (lib/local), the CLI and the tests.
 *
 * Lambda handlers (functions/api, steps, events, watchers) import the getter's own module
 * (`../ports/registry/secret-store.js`), never this one: a bundle then carries only the adapters, SDK
 * clients and libraries of the ports its handler uses (`npm run check:bundles` holds each bundle to its
 * budget). Only cloud adapters and contracts are imported here; the local host installs the local ones
 * with `provideLocalAdapters`.
 *
 * A new port is a folder under `ports/` (contract, adapters, contract test) plus one getter module here.
 */
export { type Adapters, type PortName, provideLocalAdapters } from './registry/adapters.js';
export { artifacts } from './registry/artifacts.js';
export { browser } from './registry/browser.js';
export { eventBus } from './registry/events.js';
export { buildLogs, buildRuntime, codeBuildImages, imageBuilds } from './registry/image-builds.js';
export { mediaReader } from './registry/media.js';
export { mediaWriter } from './registry/media-writer.js';
export { prStatus } from './registry/pr-status.js';
export {
  clusterRuntime,
  logsRuntime,
  rolloutWatcher,
  runtime,
  teardownRuntime,
} from './registry/runtime.js';
export { secretStore } from './registry/secret-store.js';
export { sourceHost } from './registry/source-host.js';
export { wakeRuntime } from './registry/wake.js';
export { webhookDeliveries } from './registry/webhook-deliveries.js';
export { webhookSecret } from './registry/webhook-secret.js';
export { workflows } from './registry/workflows.js';
