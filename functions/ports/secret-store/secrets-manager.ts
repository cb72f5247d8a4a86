import { randomUUID } from 'node:crypto';
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  RestoreSecretCommand,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { isAwsError } from '../../shared/aws/aws-errors.js';
import type { BundleRef, SecretStore } from './port.js';

/**
 * Secrets Manager adapter: one secret per (application, app) named `<prefix>/<applicationId>/<app>`,
 * its SecretString a JSON object of env vars. Secrets Manager has no compare-and-set, so the service
 * serializes writers per bundle before calling `write` (core/secrets.ts).
 *
 * Every write names the version it creates (`ClientRequestToken`, one per call): the SDK would generate
 * one when none is given; naming it here keeps it visible to tests. The SDK serializes a call once, so its
 * retries of the call carry the same token and a retried write puts no second version.
 */
export class SecretsManagerStore implements SecretStore {
  /** `client`: the container's Secrets Manager client (registry/aws-clients.ts). */
  constructor(
    private readonly client: SecretsManagerClient,
    private readonly prefix: string,
  ) {}

  secretName(ref: BundleRef): string {
    return `${this.prefix}/${ref.applicationId}/${ref.app}`;
  }

  /**
   * The bundle's values; undefined when its secret does not exist, or is scheduled for deletion (an
   * operator deleted it: Secrets Manager refuses reads of it during the recovery window).
   */
  async read(ref: BundleRef): Promise<Record<string, string> | undefined> {
    let secretString: string | undefined;
    try {
      const out = await this.client.send(new GetSecretValueCommand({ SecretId: this.secretName(ref) }));
      secretString = out.SecretString;
    } catch (err) {
      if (isAwsError(err, 'ResourceNotFoundException') || markedForDeletion(err)) return undefined;
      throw err;
    }
    if (!secretString) return undefined;
    try {
      return JSON.parse(secretString) as Record<string, string>;
    } catch {
      // JSON.parse's message quotes the input: leave it out.
      throw new Error(`secret ${this.secretName(ref)} does not hold a JSON object of env vars`);
    }
  }

  /**
   * Put a new value; the first write of a bundle creates its secret. When the secret appears between the
   * two calls (another writer created it), the value is put on it after all, so a write always leaves
   * this bundle's value, whole. A secret scheduled for deletion (an operator deleted it) is restored
   * first, and takes the new value: a bundle written again is the bundle.
   */
  async write(ref: BundleRef, values: Record<string, string>): Promise<void> {
    const SecretString = JSON.stringify(values);
    const SecretId = this.secretName(ref);
    const put = () =>
      this.client.send(
        new PutSecretValueCommand({ SecretId, ClientRequestToken: randomUUID(), SecretString }),
      );
    try {
      await put();
    } catch (err) {
      if (markedForDeletion(err)) {
        await this.client.send(new RestoreSecretCommand({ SecretId }));
        await put();
        return;
      }
      if (!isAwsError(err, 'ResourceNotFoundException')) throw err;
      try {
        await this.client.send(
          new CreateSecretCommand({
            Name: SecretId,
            ClientRequestToken: randomUUID(),
            SecretString,
            Description: `Preview env vars of app ${ref.app} of application ${ref.applicationId}`,
            Tags: [
              { Key: 'preview:applicationId', Value: ref.applicationId },
              { Key: 'preview:app', Value: ref.app },
            ],
          }),
        );
      } catch (createErr) {
        if (!isAwsError(createErr, 'ResourceExistsException')) throw createErr;
        await put();
      }
    }
  }
}

/**
 * Whether Secrets Manager refused a call because the secret is scheduled for deletion: an
 * InvalidRequestException saying so (the same code names other invalid requests, which are not this).
 */
function markedForDeletion(err: unknown): boolean {
  return isAwsError(err, 'InvalidRequestException') && /marked for deletion/i.test((err as Error).message);
}
