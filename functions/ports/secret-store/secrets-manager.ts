import {
  CreateSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  ResourceExistsException,
  ResourceNotFoundException,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import type { BundleRef, SecretStore } from './port.js';

/**
 * Secrets Manager adapter: one secret per (application, app) named `<prefix>/<applicationId>/<app>`,
 * its SecretString a JSON object of env vars. Secrets Manager has no compare-and-set, so the service
 * serializes writers per bundle before calling `write` (core/secrets.ts).
 */
export class SecretsManagerStore implements SecretStore {
  constructor(
    private readonly client: SecretsManagerClient,
    private readonly prefix: string,
  ) {}

  secretName(ref: BundleRef): string {
    return `${this.prefix}/${ref.applicationId}/${ref.app}`;
  }

  async read(ref: BundleRef): Promise<Record<string, string> | undefined> {
    try {
      const out = await this.client.send(new GetSecretValueCommand({ SecretId: this.secretName(ref) }));
      return out.SecretString ? (JSON.parse(out.SecretString) as Record<string, string>) : undefined;
    } catch (err) {
      if (err instanceof ResourceNotFoundException) return undefined;
      throw err;
    }
  }

  /**
   * Put a new value; the first write of a bundle creates its secret. When the secret appears between the
   * two calls (another writer created it), the value is put on it after all, so a write always leaves
   * this bundle's value, whole.
   */
  async write(ref: BundleRef, values: Record<string, string>): Promise<void> {
    const SecretString = JSON.stringify(values);
    const put = () =>
      this.client.send(new PutSecretValueCommand({ SecretId: this.secretName(ref), SecretString }));
    try {
      await put();
    } catch (err) {
      if (!(err instanceof ResourceNotFoundException)) throw err;
      try {
        await this.client.send(
          new CreateSecretCommand({
            Name: this.secretName(ref),
            SecretString,
            Description: `Preview env vars of app ${ref.app} of application ${ref.applicationId}`,
            Tags: [
              { Key: 'preview:applicationId', Value: ref.applicationId },
              { Key: 'preview:app', Value: ref.app },
            ],
          }),
        );
      } catch (createErr) {
        if (!(createErr instanceof ResourceExistsException)) throw createErr;
        await put();
      }
    }
  }
}
