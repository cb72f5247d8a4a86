/**
 * The WebhookSecret port: the secret GitHub signs webhook deliveries with (`X-Hub-Signature-256`).
 * Adapters: `github-app.ts` (the `webhookSecret` field of the GitHub App secret, in AWS mode),
 * `local-file.ts` (PREVIEW_GITHUB_WEBHOOK_SECRET, else a secret generated into the data dir).
 */
export interface WebhookSecret {
  /** The current secret. Throws (503) when none is configured: no delivery can be verified then. */
  current(): Promise<string>;
}
