/**
 * The SecretStore port: secret-bundle values. One bundle per (application, app), a JSON object of env
 * vars. Adapters: `secrets-manager.ts` (AWS Secrets Manager), `local-files.ts` (encrypted files).
 * There is no compare-and-set: callers serialize writers to one bundle (core/secrets.ts) and always write
 * the whole bundle.
 */

/** Identifies one secret bundle: one per (application, app). */
export interface BundleRef {
  applicationId: string;
  app: string;
}

export interface SecretStore {
  /** The bundle's values, or undefined when it was never written. */
  read(ref: BundleRef): Promise<Record<string, string> | undefined>;
  /** Create or replace the whole bundle. */
  write(ref: BundleRef, values: Record<string, string>): Promise<void>;
}
