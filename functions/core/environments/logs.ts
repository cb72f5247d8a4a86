import { keys } from '../../manifest/tables.js';
import type { AppLogs, LogSource } from '../../ports/runtime/port.js';
import type { SecretStore } from '../../ports/secret-store/port.js';
import { NotFoundError } from '../../shared/errors.js';
import { maskSecrets } from '../../shared/masking/mask.js';
import { findApplicationByRepo } from '../applications/index.js';
import { factorySecret } from '../scenarios/index.js';
import { findEnvironment } from './lifecycle.js';
import type { EnvRef } from './types.js';

/** Lines a log read answers when the caller names no `tail`. */
export const DEFAULT_TAIL_LINES = 200;
/** Most lines a log read may ask for. */
export const MAX_TAIL_LINES = 10_000;
/** Most bytes a log read answers (UTF-8, the truncation notice included): 1 MB. */
export const MAX_LOG_BYTES = 1024 * 1024;
/** The first line of a log cut to `MAX_LOG_BYTES` (earlier output left out). */
export const TRUNCATED_NOTICE = `[earlier output cut: a log answer is at most ${MAX_LOG_BYTES} bytes; ask for a smaller tail]`;

export interface LogRequest {
  app: string;
  source: LogSource;
  tail: number;
}

/**
 * The end of an app's output (`source: 'app'`) or of its latest build's (`'build'`), as text.
 * Steps: the environment must be the caller's organization's and declare the app (404 otherwise, the same
 * answer for another org's environment as for none); the runtime reads the last `tail` lines (locally the
 * log files, on AWS the pods' logs or the CodeBuild log in CloudWatch); every value of the app's secret
 * bundle (and the factory secret, for the factory app) is masked, in its encoded forms too, before
 * anything is cut; then the text is cut to its last `tail` lines and to `MAX_LOG_BYTES` from the start,
 * at a line boundary, under a notice saying so. A log that does not exist (yet) is a 404.
 */
export async function appLogs(
  deps: { runtime: AppLogs; secrets: SecretStore },
  ref: EnvRef,
  req: LogRequest,
): Promise<string> {
  const env = await findEnvironment(ref.orgId, keys.environments.envKey(ref.repoFullName, ref.prNumber));
  if (!env) throw new NotFoundError('environment not found');
  const declared = env.apps ?? Object.keys(env.appSpecs ?? {});
  if (!declared.includes(req.app))
    throw new NotFoundError(`app ${req.app} is not an app of this environment`);
  const target = {
    orgId: env.orgId,
    envKey: env.envKey,
    repoFullName: env.repoFullName,
    prNumber: env.prNumber,
  };
  const read = await deps.runtime.logs(target, req.app, {
    source: req.source,
    tailLines: req.tail,
    maxBytes: MAX_LOG_BYTES,
  });
  if (!read)
    throw new NotFoundError(
      req.source === 'build'
        ? `app ${req.app} has no build log (yet)`
        : `app ${req.app} has no output (yet): it has not been started`,
    );
  const masked = maskSecrets(read.text, await secretValues(deps.secrets, env, req.app));
  return capLog(masked, req.tail);
}

/**
 * The values a failed image build's output is masked with before any of it reaches the environment's
 * error (the build-finished handler): those of each app built, as its log is masked (`appLogs`). Builds
 * get no secret bundle, but a build can print a value it holds some other way (a file of the repository).
 */
export async function buildSecretValues(
  secrets: SecretStore,
  scope: { orgId: string; envKey: string },
  apps: string[],
): Promise<string[]> {
  const env = await findEnvironment(scope.orgId, scope.envKey);
  if (!env) return [];
  const values = await Promise.all(apps.map((app) => secretValues(secrets, env, app)));
  return [...new Set(values.flat())];
}

/** The values to mask in an app's output: its bundle's, and the factory secret (fork PRs run with none). */
async function secretValues(
  secrets: SecretStore,
  env: { orgId: string; repoFullName: string; inputs?: { fork?: boolean }; factory?: { app: string } },
  app: string,
): Promise<string[]> {
  const application = await findApplicationByRepo(env.orgId, env.repoFullName);
  if (!application) return [];
  const values = Object.values((await secrets.read({ applicationId: application.applicationId, app })) ?? {});
  const factoryApp = env.factory?.app ?? application.factoryApp;
  if (factoryApp === app) {
    const factory = await factorySecret(secrets, application.applicationId);
    if (factory) values.push(factory);
  }
  return values.filter((v) => v.length > 0);
}

/**
 * `text` cut to its last `tail` lines, then to `MAX_LOG_BYTES` bytes: whole lines from the end, under
 * `TRUNCATED_NOTICE` when any were left out for size (a single line longer than the cap keeps its end).
 */
export function capLog(text: string, tail: number): string {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const kept = lines.slice(-tail);
  const whole = kept.length ? `${kept.join('\n')}\n` : '';
  if (Buffer.byteLength(whole) <= MAX_LOG_BYTES) return whole;
  const budget = MAX_LOG_BYTES - Buffer.byteLength(TRUNCATED_NOTICE) - 1;
  const out: string[] = [];
  let bytes = 0;
  for (let i = kept.length - 1; i >= 0; i--) {
    const size = Buffer.byteLength(kept[i]!) + 1;
    if (bytes + size > budget) {
      if (out.length === 0) {
        // One line longer than the cap: its last bytes (cut at a character boundary).
        const buf = Buffer.from(kept[i]!);
        out.push(
          buf
            .subarray(buf.length - (budget - 1))
            .toString('utf8')
            .replace(/^\uFFFD+/, ''),
        );
      }
      break;
    }
    out.push(kept[i]!);
    bytes += size;
  }
  return `${TRUNCATED_NOTICE}\n${out.reverse().join('\n')}\n`;
}
