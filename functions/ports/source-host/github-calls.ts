import { ServiceUnavailableError } from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import { TransientError } from '../../shared/step-errors.js';

/*
 * One GitHub call with the GitHub App adapter's error mapping (the file comment of github-app.ts says
 * which): the statuses an operation names → not found; 5xx, network errors and rate limits → retried with
 * backoff honouring GitHub's headers, then a TransientError; 401 on an App JWT → a ServiceUnavailableError
 * naming the secret to fix.
 */

export type Found<T> = { found: true; value: T } | { found: false };
/** What @octokit/request throws for an HTTP error (or, with status 500 and no response, a network one). */
type RequestFailure = {
  status: number;
  message: string;
  request?: { headers?: Record<string, string | undefined> };
  response?: { headers?: Record<string, string | undefined>; data?: unknown };
};

const MINUTE = 60_000;

function asFailure(err: unknown): RequestFailure | undefined {
  const e = err as Partial<RequestFailure> | undefined;
  return e && typeof e === 'object' && typeof e.status === 'number' ? (e as RequestFailure) : undefined;
}

function githubMessage(f: RequestFailure): string {
  const data = f.response?.data as { message?: unknown } | undefined;
  return typeof data?.message === 'string' ? data.message : f.message;
}

export interface GitHubCallsOptions {
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /** Attempts per call, the first included. */
  maxAttempts: number;
  /** The longest single wait before a retry; a rate limit asking for more gives up at once. */
  maxWaitMs: number;
  /** The App secret's ARN, named when GitHub rejects the App's credentials. */
  secretArn: () => string | undefined;
  /** GitHub rejected an installation token (revoked): every installation must get a new one. */
  onTokenRejected: () => void;
}

/** GitHub calls with retries and the adapter's error mapping. */
export class GitHubCalls {
  constructor(private readonly opts: GitHubCallsOptions) {}

  /**
   * One GitHub call with the error mapping of this adapter: the statuses in `absent` → `{found: false}`;
   * 5xx, network errors and rate limits → retried, then TransientError; anything else → thrown, mapped.
   */
  async call<T>(
    what: string,
    fn: () => Promise<T>,
    absent: number[] = [404],
    as: 'app' | 'installation' = 'installation',
  ): Promise<Found<T>> {
    for (let attempt = 1; ; attempt++) {
      let failure: RequestFailure | undefined;
      try {
        return { found: true, value: await fn() };
      } catch (err) {
        failure = asFailure(err);
        if (!failure) throw err;
        if (absent.includes(failure.status)) return { found: false };
        const wait = this.retryWait(failure, attempt);
        if (wait === undefined) throw this.permanent(what, failure, as);
        const summary = `${failure.status} ${githubMessage(failure)}`;
        if (wait > this.opts.maxWaitMs) {
          throw new TransientError(
            `GitHub rate limit while ${what} (${summary}): retry in ${Math.ceil(wait / 1000)} s`,
          );
        }
        if (attempt >= this.opts.maxAttempts) {
          throw new TransientError(`GitHub failed while ${what} (${summary}), ${attempt} attempts`);
        }
        log.warn('GitHub call failed; retrying', { what, status: failure.status, attempt, waitMs: wait });
        await this.opts.sleep(wait);
      }
    }
  }

  /** How long to wait before retrying this failure, or undefined when retrying cannot help. */
  private retryWait(f: RequestFailure, attempt: number): number | undefined {
    const headers = f.response?.headers ?? {};
    const backoff = 1000 * 2 ** (attempt - 1);
    if (f.status >= 500) return backoff;
    const retryAfter = headers['retry-after'];
    const exhausted = headers['x-ratelimit-remaining'] === '0' && headers['x-ratelimit-reset'];
    if (f.status !== 429 && !(f.status === 403 && (retryAfter || exhausted))) return undefined;
    if (retryAfter && Number.isFinite(Number(retryAfter))) return Math.max(0, Number(retryAfter) * 1000);
    if (exhausted) return Math.max(0, Number(headers['x-ratelimit-reset']) * 1000 - this.opts.now());
    // GitHub: without either header, wait at least a minute.
    return MINUTE;
  }

  /** `as`: whom the call authenticates as (the App with its JWT, or an installation with its token). */
  private permanent(what: string, f: RequestFailure, as: 'app' | 'installation'): Error {
    const summary = `${f.status} ${githubMessage(f)}`;
    if (f.status === 401) {
      // @octokit/auth-app sends the App JWT as `bearer …` and installation tokens as `token …`.
      if (as === 'app' || /^bearer /i.test(f.request?.headers?.authorization ?? '')) {
        return new ServiceUnavailableError(
          `GitHub rejected the App's credentials (${summary}): check appId and privateKey in secret ` +
            `${this.opts.secretArn()}`,
        );
      }
      // An installation token GitHub no longer accepts (revoked): every installation gets a new one.
      this.opts.onTokenRejected();
      return new TransientError(`GitHub rejected the installation token while ${what} (${summary})`);
    }
    if (f.status === 403) {
      return new ServiceUnavailableError(
        `GitHub refused ${what} (${summary}): the App needs read access to contents and metadata`,
      );
    }
    return new Error(`GitHub answered ${summary} while ${what}`);
  }
}
