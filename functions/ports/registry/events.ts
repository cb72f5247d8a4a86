import { config } from '../../shared/config.js';
import { EventBridgeBus } from '../events/eventbridge.js';
import { adapter, required } from './adapters.js';
import { eventBridgeClient } from './aws-clients.js';

/**
 * The service's own event bus (EventBridge, EVENT_BUS_NAME), through the container's EventBridge client
 * (registry/aws-clients.ts: the SDK's credentials, retries and endpoint handling).
 */
export const eventBus = /* @__PURE__ */ adapter(
  'eventBus',
  () => new EventBridgeBus(eventBridgeClient(), required(config().events.busName, 'EVENT_BUS_NAME')),
);
