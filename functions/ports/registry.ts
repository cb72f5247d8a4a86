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
 * The runtime, a port of several roles (runtime/port.ts), has a getter module per role in registry/runtime/.
 */
export { type Adapters, type PortName, provideLocalAdapters } from './registry/adapters.js';
export { artifacts } from './registry/artifacts.js';
export { browser } from './registry/browser.js';
export { eventBus } from './registry/events.js';
export { linkSigner } from './registry/link-signer.js';
export { mediaReader } from './registry/media.js';
export { mediaWriter } from './registry/media-writer.js';
export { prStatus } from './registry/pr-status.js';
export { appLogReader, buildLogs } from './registry/runtime/app-logs.js';
export { appRunner, rolloutWatcher } from './registry/runtime/app-runner.js';
export { appTeardown } from './registry/runtime/app-teardown.js';
export { frontDoor } from './registry/runtime/front-door.js';
export { codeBuildImages, imageBuilder, imageBuilds } from './registry/runtime/image-builder.js';
export { runtime } from './registry/runtime/whole.js';
export { secretStore } from './registry/secret-store.js';
export { sourceHost } from './registry/source-host.js';
export { webhookDeliveries } from './registry/webhook-deliveries.js';
export { webhookSecret } from './registry/webhook-secret.js';
export { workflows } from './registry/workflows.js';
