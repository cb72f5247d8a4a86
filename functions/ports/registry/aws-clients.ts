import { AwsJsonClient, type JsonService } from '../../shared/aws-json.js';
import { config } from '../../shared/config.js';

const clients = new Map<string, AwsJsonClient>();

/**
 * The JSON-protocol client of an AWS service (shared/aws-json.ts) for this container: created on first
 * use, then shared by every adapter that calls the service (one connection pool per service, whichever
 * getters a handler uses: the secret store, the GitHub App key and the run-link key all read Secrets
 * Manager through one client).
 */
export function awsClient(service: JsonService): AwsJsonClient {
  let client = clients.get(service.id);
  if (!client) {
    client = new AwsJsonClient(service, { region: config().region });
    clients.set(service.id, client);
  }
  return client;
}
