import { createHmac, randomBytes } from 'node:crypto';
import type { SecretStore } from '../../ports/secret-store/port.js';
import { ACCESS_COOKIE, signAccessToken } from '../../shared/access-token.js';
import { log } from '../../shared/log.js';
import { maskSecrets } from '../../shared/masking/mask.js';
import { accessKey } from '../applications/index.js';
import { claimDown, readScenarioState, type ScenarioState, saveScenarioState } from './state.js';

/*
 * The application's Environment Factory (README "Scenario data"): a test names a scenario recipe; before
 * its steps the run sends the factory a signed `up` with the recipe's graph, tokens substituted; applies
 * the auth it answers to the browser; and sends `down` once the steps ended. Here: where the factory is,
 * its signing secret, the tokens, the signed client, the payloads of `up` and `down`, and the `down` a
 * run owes when it ended without sending it.
 */

/** Where the factory is, per application or per preview.yaml (`factory: {app, path}`). */
export interface FactoryLocation {
  app: string;
  path: string;
}

/** The env var the factory app receives its signing secret as. */
export const FACTORY_SECRET_VAR = 'PREVIEW_FACTORY_SECRET';
/**
 * The factory signing secret's bundle in the SecretStore: a reserved app name (not a DNS label, so never
 * an app of preview.yaml, and never mounted as an app's own bundle).
 */
export const FACTORY_SECRET_APP = '_factory';

// ---------------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------------

/**
 * `value` with `{{testRunId}}` and `{{testRunShortId}}` replaced in every string (keys included), at any
 * depth, inside longer strings too. `_alias` / `_ref` are data like any other and pass through.
 */
export function substituteTokens(
  value: unknown,
  tokens: { testRunId: string; testRunShortId: string },
): unknown {
  const sub = (s: string) =>
    s.split('{{testRunId}}').join(tokens.testRunId).split('{{testRunShortId}}').join(tokens.testRunShortId);
  if (typeof value === 'string') return sub(value);
  if (Array.isArray(value)) return value.map((v) => substituteTokens(v, tokens));
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[sub(k)] = substituteTokens(v, tokens);
    return out;
  }
  return value;
}

// ---------------------------------------------------------------------------------------------------
// Signing
// ---------------------------------------------------------------------------------------------------

/** `x-signature`: hex HMAC-SHA256 of the raw body with the application's factory secret. */
export const signBody = (secret: string, body: string): string =>
  createHmac('sha256', secret).update(body, 'utf8').digest('hex');

/**
 * The application's factory signing secret (32 random bytes, hex), or undefined when it has none yet.
 * Read-only: the deploy and the run executor only read secrets; the operator CLI creates it
 * (`apps create`, `apps update --factory-app`, `apps rotate-factory-secret`: `ensureFactorySecret`).
 */
export async function factorySecret(
  secrets: SecretStore,
  applicationId: string,
): Promise<string | undefined> {
  return (await secrets.read({ applicationId, app: FACTORY_SECRET_APP }))?.[FACTORY_SECRET_VAR] || undefined;
}

/** The application's factory secret, created when it has none. */
export async function ensureFactorySecret(secrets: SecretStore, applicationId: string): Promise<string> {
  return (await factorySecret(secrets, applicationId)) ?? rotateFactorySecret(secrets, applicationId);
}

/** Why a scenario run cannot sign: the application has no factory secret. */
export const noFactorySecret = (applicationId: string) =>
  `application ${applicationId} has no factory signing secret: run \`previewctl apps rotate-factory-secret ` +
  `--app ${applicationId}\`, then deploy again so the factory app gets it as ${FACTORY_SECRET_VAR}`;

/** Replace the application's factory secret with a new one (`previewctl apps rotate-factory-secret`). */
export async function rotateFactorySecret(secrets: SecretStore, applicationId: string): Promise<string> {
  const secret = randomBytes(32).toString('hex');
  await secrets.write({ applicationId, app: FACTORY_SECRET_APP }, { [FACTORY_SECRET_VAR]: secret });
  return secret;
}

// ---------------------------------------------------------------------------------------------------
// The factory client
// ---------------------------------------------------------------------------------------------------

export interface FactoryAuth {
  headers?: Record<string, string>;
  cookies?: { name: string; value: string; domain?: string; path?: string }[];
}

export interface UpAnswer {
  auth?: FactoryAuth;
  refs?: unknown;
}

export interface FactoryClientOptions {
  /** How long 502/503/504 and connection errors are retried, and how long one request may wait. */
  retryMs?: number;
  timeoutMs?: number;
  /** First backoff; doubles each retry up to 5 s. */
  backoffMs?: number;
  fetch?: typeof fetch;
  now?: () => number;
  /** Extra request headers: a protected preview's access cookie (the front door), never quoted in an error. */
  headers?: Record<string, string>;
}

export class FactoryError extends Error {
  override name = 'FactoryError';
}

const RETRIED = new Set([502, 503, 504]);
const MAX_ANSWER = 500;

/**
 * POST a signed JSON body to the factory. Retries 502/503/504 and connection errors for up to `retryMs`
 * (30 s) with backoff; a 4xx / other non-2xx, or no answer within `timeoutMs` (30 s), throws a
 * FactoryError quoting the answer (truncated, `mask` applied). A 3xx is not followed: a FactoryError
 * naming its status and Location. Returns the parsed 2xx body ({} if empty).
 */
export async function callFactory(
  url: string,
  secret: string,
  payload: unknown,
  mask: (text: string) => string,
  opts: FactoryClientOptions = {},
): Promise<unknown> {
  const retryMs = opts.retryMs ?? 30_000;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const now = opts.now ?? Date.now;
  const doFetch = opts.fetch ?? fetch;
  const body = JSON.stringify(payload);
  const headers = {
    ...opts.headers,
    'content-type': 'application/json',
    'x-signature': signBody(secret, body),
  };
  const started = now();
  let backoff = opts.backoffMs ?? 250;
  const action = (payload as { action?: string }).action ?? 'request';
  for (let attempt = 1; ; attempt++) {
    let retryable: string;
    try {
      const res = await doFetch(url, {
        method: 'POST',
        headers,
        body,
        // Never followed (a run stays inside its preview): a 303 would have the service fetch and quote whatever it names, a
        // 307/308 would forward the signed body and its x-signature there.
        redirect: 'manual',
        signal: AbortSignal.timeout(Math.max(1, Math.min(timeoutMs, started + retryMs + timeoutMs - now()))),
      });
      if (res.status >= 300 && res.status < 400) {
        await res.body?.cancel().catch(() => undefined);
        throw new FactoryError(mask(redirectRefused(action, url, res)));
      }
      const text = await res.text();
      if (res.ok) {
        if (!text.trim()) return {};
        try {
          return JSON.parse(text);
        } catch {
          throw new FactoryError(
            mask(`the factory's ${action} answer is not JSON: ${text.slice(0, MAX_ANSWER)}`),
          );
        }
      }
      const quoted = `${res.status} ${text.slice(0, MAX_ANSWER)}${text.length > MAX_ANSWER ? '…' : ''}`;
      if (!RETRIED.has(res.status))
        throw new FactoryError(mask(`the Environment Factory refused ${action} (${url}): ${quoted}`));
      retryable = quoted;
    } catch (err) {
      if (err instanceof FactoryError) throw err;
      const e = err as Error;
      if (e.name === 'TimeoutError' || e.name === 'AbortError')
        throw new FactoryError(
          mask(`the Environment Factory did not answer ${action} (${url}) within ${timeoutMs / 1000} s`),
        );
      retryable = `${e.message}${(e.cause as Error | undefined)?.message ? `: ${(e.cause as Error).message}` : ''}`;
    }
    if (now() - started + backoff > retryMs)
      throw new FactoryError(
        mask(
          `the Environment Factory kept failing ${action} (${url}) for ${Math.round((now() - started) / 1000)} s ` +
            `(${attempt} attempts): ${retryable}`,
        ),
      );
    log.info('factory request retried', { action, attempt, reason: retryable.slice(0, 100) });
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 5_000);
  }
}

/** A factory answering with a redirect: its status and Location, never what the Location holds. */
function redirectRefused(action: string, url: string, res: Response): string {
  const location = res.headers.get('location');
  return (
    `the Environment Factory answered ${action} (${url}) with a redirect, ${res.status}` +
    `${location ? ` to ${location.slice(0, 300)}` : ' without a Location'}, which is not followed: the ` +
    'factory must answer at its own URL'
  );
}

/** Keep only the auth shapes the protocol defines. */
export function parseUpAnswer(answer: unknown): UpAnswer {
  const a = (typeof answer === 'object' && answer !== null ? answer : {}) as Record<string, unknown>;
  const out: UpAnswer = {};
  const auth = a.auth as Record<string, unknown> | undefined;
  if (auth && typeof auth === 'object') {
    out.auth = {};
    if (auth.headers && typeof auth.headers === 'object')
      out.auth.headers = Object.fromEntries(
        Object.entries(auth.headers as Record<string, unknown>).map(([k, v]) => [k, String(v)]),
      );
    if (Array.isArray(auth.cookies))
      out.auth.cookies = (auth.cookies as Record<string, unknown>[])
        .filter((c) => c && typeof c.name === 'string' && typeof c.value === 'string')
        .map((c) => ({
          name: c.name as string,
          value: c.value as string,
          ...(typeof c.domain === 'string' ? { domain: c.domain } : {}),
          ...(typeof c.path === 'string' ? { path: c.path } : {}),
        }));
  }
  if (Object.hasOwn(a, 'refs')) out.refs = a.refs;
  return out;
}

/** The factory URL: the app's URL in the environment plus the path. */
export function factoryUrl(
  urls: Record<string, string>,
  factory: FactoryLocation,
): string | { error: string } {
  const base = urls[factory.app];
  if (!base)
    return {
      error: `the factory app "${factory.app}" is not an app of the run's environment (its apps: ${
        Object.keys(urls).sort().join(', ') || 'none'
      })`,
    };
  const path = factory.path || '/';
  return `${base.replace(/\/+$/, '')}${path.startsWith('/') ? '' : '/'}${path}`;
}

/**
 * The `down` owed by a run that ended without sending it (its executor died, a restart abandoned it):
 * claimed first (claimDown: one sender, `by` names which), then sent best effort and recorded.
 * @returns whether this call sent it
 */
export async function sendOwedDown(
  deps: { secrets: SecretStore },
  run: { runId: string; applicationId?: string; scenarioState?: unknown },
  opts: FactoryClientOptions & { by?: string } = {},
): Promise<boolean> {
  const state = readScenarioState(run.scenarioState);
  if (state?.status !== 'up' || !state.factoryUrl || !run.applicationId) return false;
  const secret = await factorySecret(deps.secrets, run.applicationId);
  if (!secret) return false;
  if (!(await claimDown(run.runId, opts.by ?? 'recovery'))) return false;
  const started = Date.now();
  try {
    // A protected preview's factory, called at its public URL: with a fresh access cookie of its own.
    const key = state.factoryAccess ? await accessKey(deps.secrets, run.applicationId) : undefined;
    const headers = key
      ? { cookie: `${ACCESS_COOKIE}=${signAccessToken(key, state.factoryAccess!, Date.now())}` }
      : undefined;
    await callFactory(state.factoryUrl, secret, downPayload(state), (t) => maskSecrets(t, [secret]), {
      ...opts,
      ...(headers ? { headers } : {}),
    });
    state.status = 'down';
  } catch (err) {
    state.status = 'down_failed';
    state.downError = (err as Error).message.slice(0, 1000);
  }
  state.downMs = Date.now() - started;
  await saveScenarioState(run.runId, state);
  return true;
}

export const upPayload = (state: ScenarioState, create: unknown) => ({
  action: 'up',
  testRunId: state.testRunId,
  testRunShortId: state.testRunShortId,
  scenario: { setupId: state.setupId, version: state.version, name: state.name },
  create,
});

export const downPayload = (state: ScenarioState) => ({
  action: 'down',
  testRunId: state.testRunId,
  scenario: { setupId: state.setupId, version: state.version, name: state.name },
  refs: state.refs ?? null,
});
