import { randomUUID } from 'node:crypto';
import { type AwsJsonClient, getSecretString, isAwsError } from '../../shared/aws-json.js';
import type { BundleRef, SecretStore } from './port.js';

/*
 * The Secrets Manager operations sent here, as far as they are sent and read (the wire JSON of the AWS
 * JSON 1.1 protocol: shared/aws-json.ts). The other output fields (ARN, VersionId, CreatedDate as epoch
 * seconds…) are unread. `ClientRequestToken` is the id of the version a write creates: the SDK generated
 * one when none was given, and the API reference asks callers without an SDK to send their own. One per
 * call, the same across its retries (the input is serialized once per call), so a retried write puts no
 * second version.
 */
interface PutSecretValueInput {
  SecretId: string;
  ClientRequestToken: string;
  SecretString: string;
}
interface CreateSecretInput {
  Name: string;
  ClientRequestToken: string;
  SecretString: string;
  Description?: string;
  Tags?: { Key: string; Value: string }[];
}

/**
 * Secrets Manager adapter: one secret per (application, app) named `<prefix>/<applicationId>/<app>`,
 * its SecretString a JSON object of env vars. Secrets Manager has no compare-and-set, so the service
 * serializes writers per bundle before calling `write` (core/secrets.ts).
 */
export class SecretsManagerStore implements SecretStore {
  /** `client`: a Secrets Manager client (`new AwsJsonClient(SECRETS_MANAGER, …)`). */
  constructor(
    private readonly client: AwsJsonClient,
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
      secretString = await getSecretString(this.client, this.secretName(ref));
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
    const put = () => {
      const input: PutSecretValueInput = {
        SecretId: this.secretName(ref),
        ClientRequestToken: randomUUID(),
        SecretString,
      };
      return this.client.call('PutSecretValue', input);
    };
    try {
      await put();
    } catch (err) {
      if (markedForDeletion(err)) {
        await this.client.call('RestoreSecret', { SecretId: this.secretName(ref) });
        await put();
        return;
      }
      if (!isAwsError(err, 'ResourceNotFoundException')) throw err;
      try {
        const input: CreateSecretInput = {
          Name: this.secretName(ref),
          ClientRequestToken: randomUUID(),
          SecretString,
          Description: `Preview env vars of app ${ref.app} of application ${ref.applicationId}`,
          Tags: [
            { Key: 'preview:applicationId', Value: ref.applicationId },
            { Key: 'preview:app', Value: ref.app },
          ],
        };
        await this.client.call('CreateSecret', input);
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
