import { createPrivateKey } from 'node:crypto';
import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { App } from '@octokit/app';
import { Octokit } from '@octokit/core';
import * as z from 'zod/mini';
import { isAwsError, isRetryableAwsError } from '../../shared/aws/aws-errors.js';
import { ServiceUnavailableError } from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import '../../shared/zod-locale.js';
import { TransientError } from '../../shared/step-errors.js';

/*
 * The GitHub App's credentials and client, shared by the source host, PR status (ports/pr-status) and the
 * webhook secret (ports/webhook-secret): the Secrets Manager secret an operator fills (its shape, its
 * validation, read once per container) and the App with its Octokit built from it. The private key is
 * never logged or quoted in an error.
 */

/** The JSON an operator puts in the GitHub App secret (`GITHUB_APP_SECRET_ARN`). */
export const GITHUB_APP_SECRET_SHAPE =
  '{"appId": "123456", "privateKey": "-----BEGIN RSA PRIVATE KEY-----\\n...", "webhookSecret": "..."}';

function isPrivateKey(pem: string): boolean {
  if (!pem.includes('-----BEGIN')) return false;
  try {
    createPrivateKey(pem);
    return true;
  } catch {
    return false;
  }
}

/** The secret's SecretString, validated. `privateKey` may have its newlines escaped as `\n`. */
export const githubAppSecretSchema = z.object({
  appId: z.pipe(
    z.union(
      [
        z.string().check(z.regex(/^[1-9][0-9]*$/, { error: "must be the App's numeric id" })),
        z.number().check(z.int(), z.gt(0, { error: "must be the App's numeric id" })),
      ],
      { error: "must be the App's numeric id" },
    ),
    z.transform(String),
  ),
  privateKey: z
    .pipe(
      z.string({ error: 'must be a string' }),
      z.transform((k: string) => k.replace(/\\n/g, '\n').trim()),
    )
    .check(
      z.refine(isPrivateKey, {
        message: "must be the App's private key in PEM (-----BEGIN RSA PRIVATE KEY----- ...)",
      }),
    ),
  webhookSecret: z
    .string({ error: 'must be a string' })
    .check(z.minLength(1, { error: 'must not be empty' })),
});
export type GitHubAppSecret = z.output<typeof githubAppSecretSchema>;

/**
 * Parse and validate the secret's SecretString. Throws a ServiceUnavailableError telling the operator
 * what to put in the secret; messages name fields, never values.
 */
export function parseGitHubAppSecret(secretString: string | undefined, secretArn: string): GitHubAppSecret {
  const fill = `the operator must fill secret ${secretArn} with JSON ${GITHUB_APP_SECRET_SHAPE}`;
  if (!secretString?.trim()) throw new ServiceUnavailableError(`the GitHub App secret is empty: ${fill}`);
  let json: unknown;
  try {
    json = JSON.parse(secretString);
  } catch {
    // JSON.parse's message quotes the input: leave it out.
    throw new ServiceUnavailableError(`the GitHub App secret is not valid JSON: ${fill}`);
  }
  const placeholder = typeof json === 'object' && json !== null && Object.values(json).every((v) => v === '');
  // The stack creates the secret with every field empty; it is the operator's to fill.
  if (placeholder) throw new ServiceUnavailableError(`the GitHub App secret is not filled in: ${fill}`);
  const parsed = githubAppSecretSchema.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(secret)'} ${i.message}`);
    throw new ServiceUnavailableError(`the GitHub App secret is invalid (${problems.join('; ')}): ${fill}`);
  }
  return parsed.data;
}

/** Reads the GitHub App secret once per container; a failed read is not cached (the operator may fix it). */
export class GitHubAppCredentials {
  private cached: Promise<GitHubAppSecret> | undefined;

  /** `client`: the container's Secrets Manager client (registry/aws-clients.ts). */
  constructor(
    private readonly client: SecretsManagerClient,
    readonly secretArn: string | undefined,
  ) {}

  get(): Promise<GitHubAppSecret> {
    this.cached ??= this.load().catch((err) => {
      this.cached = undefined;
      throw err;
    });
    return this.cached;
  }

  private async load(): Promise<GitHubAppSecret> {
    const arn = this.secretArn;
    if (!arn) {
      throw new ServiceUnavailableError(
        'the GitHub App is not configured: GITHUB_APP_SECRET_ARN is not set (the stack sets it to the ' +
          'secret holding the App credentials)',
      );
    }
    let secretString: string | undefined;
    try {
      secretString = (await this.client.send(new GetSecretValueCommand({ SecretId: arn }))).SecretString;
    } catch (err) {
      if (isAwsError(err, 'ResourceNotFoundException')) secretString = undefined;
      else {
        const message = `could not read the GitHub App secret ${arn} (${(err as Error).name ?? 'error'})`;
        // Throttled, a server error or no answer, after the SDK's own retries: worth another try later.
        if (isRetryableAwsError(err)) throw new TransientError(message, { cause: err });
        throw new ServiceUnavailableError(message, { cause: err });
      }
    }
    return parseGitHubAppSecret(secretString, arn);
  }
}

export type AppClient = InstanceType<typeof App>;

const octokitLog = {
  debug: () => {},
  info: () => {},
  warn: (message: string) => log.warn(`octokit: ${message}`),
  error: (message: string) => log.error(`octokit: ${message}`),
};

/**
 * The GitHub App (and its Octokit, at `apiUrl`) built from the secret on first use and kept; a failed
 * build (an unfilled secret, say) is retried on the next call. Shared by the source host and PR status.
 */
export function githubAppGetter(
  credentials: Pick<GitHubAppCredentials, 'get'>,
  apiUrl: string,
): () => Promise<AppClient> {
  let app: Promise<AppClient> | undefined;
  return () => {
    app ??= credentials
      .get()
      .then(
        (secret) =>
          new App({
            appId: Number(secret.appId),
            privateKey: secret.privateKey,
            Octokit: Octokit.defaults({
              baseUrl: apiUrl.replace(/\/+$/, ''),
              userAgent: 'preview-control-plane',
            }),
            log: octokitLog,
          }),
      )
      .catch((err) => {
        app = undefined;
        throw err;
      });
    return app;
  };
}
