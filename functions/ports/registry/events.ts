import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { config } from '../../shared/config.js';
import { EventBridgeBus } from '../events/eventbridge.js';
import { adapter, required } from './adapters.js';

/**
 * The service's own event bus (EventBridge, EVENT_BUS_NAME). Requests are signed with the credentials of
 * the SDK's default chain (in a Lambda bundle: the function's environment credentials, see
 * shared/lambda-credentials.ts) and go to `AWS_ENDPOINT_URL_EVENTBRIDGE` when set, as the SDK's clients
 * would.
 */
export const eventBus = /* @__PURE__ */ adapter('eventBus', () => {
  const c = config();
  return new EventBridgeBus({
    busName: required(c.events.busName, 'EVENT_BUS_NAME'),
    region: c.region,
    credentials: defaultProvider(),
    endpoint: process.env.AWS_ENDPOINT_URL_EVENTBRIDGE ?? process.env.AWS_ENDPOINT_URL,
  });
});
