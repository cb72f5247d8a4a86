import { randomBytes } from 'node:crypto';
import type { SecretStore } from '../../ports/secret-store/port.js';
import { ACCESS_COOKIE, accessLink, signAccessToken } from '../../shared/access-token.js';
import { config, protectionRefusal } from '../../shared/config.js';
import { ValidationError } from '../../shared/errors.js';

/*
 * Who may open a preview, and when it sleeps (the front door, docs/reference/access-and-sleep.md).
 * Per application: `access` (`protected`: a visitor needs the environment's signed link, whose
 * cookie the front door checks; `public`: anyone who reaches it) and `sleepAfterMinutes` (idle minutes
 * before a PR preview is scaled to zero; 0 = never). The access key that signs the links lives in the
 * secret store under a reserved app name, never in a table, a response or a log.
 */

export type AccessMode = 'protected' | 'public';
export const ACCESS_MODES: readonly AccessMode[] = ['protected', 'public'];

/** Idle minutes before a PR preview sleeps, when the application sets none. */
export const DEFAULT_SLEEP_AFTER_MINUTES = 30;
/** The longest `sleepAfterMinutes` (a week). */
export const MAX_SLEEP_AFTER_MINUTES = 7 * 24 * 60;

/** The access key's bundle in the SecretStore: a reserved app name (not a DNS label, never an app's). */
export const ACCESS_KEY_APP = '_access';
const ACCESS_KEY_VAR = 'PREVIEW_ACCESS_KEY';

/** An application's access settings as stored (both optional: the defaults below apply). */
export interface AccessSettings {
  access?: AccessMode;
  sleepAfterMinutes?: number;
}

/**
 * The access an application's previews get: its own setting, else `protected` in AWS (previews face the
 * internet) unless the stack chose its default explicitly (PREVIEW_DEFAULT_ACCESS: it must where the
 * cluster cannot enforce protection, lib/cdk), and `public` locally (they answer on the loopback only).
 */
export const effectiveAccess = (
  app: AccessSettings,
  mode: 'aws' | 'local',
  stackDefault?: AccessMode,
): AccessMode => app.access ?? (mode === 'aws' ? (stackDefault ?? 'protected') : 'public');

/**
 * Refuse `access: protected` where this stack cannot enforce it (a ValidationError, 400, naming the
 * setting: shared/config.ts `protectionRefusal`); what PATCH application and `previewctl apps update`
 * run before anything is stored.
 */
export function assertProtectable(access: AccessMode | undefined): void {
  if (access !== 'protected') return;
  const settings = config();
  const refusal = settings.mode === 'aws' ? protectionRefusal(settings.eks) : undefined;
  if (refusal) throw new ValidationError(`access cannot be protected: ${refusal}`);
}

/**
 * Idle minutes before an environment sleeps (0 = never): main-branch environments (PR 0) never sleep;
 * a PR environment after the application's `sleepAfterMinutes`, default 30.
 */
export const effectiveSleepMinutes = (app: AccessSettings, prNumber: number): number =>
  prNumber === 0 ? 0 : (app.sleepAfterMinutes ?? DEFAULT_SLEEP_AFTER_MINUTES);

/** `--sleep-after-minutes` as given: a number of minutes, decimals allowed, 0..MAX; else a ValidationError. */
export function parseSleepMinutes(text: string | number): number {
  const s = String(text).trim();
  const n = Number(s);
  if (!/^\d+(\.\d+)?$/.test(s) || !Number.isFinite(n) || n > MAX_SLEEP_AFTER_MINUTES)
    throw new ValidationError(
      `sleepAfterMinutes must be a number of minutes from 0 (never) to ${MAX_SLEEP_AFTER_MINUTES}`,
    );
  return n;
}

export function parseAccessMode(text: string): AccessMode {
  if (!(ACCESS_MODES as readonly string[]).includes(text))
    throw new ValidationError(`access must be one of ${ACCESS_MODES.join(', ')}`);
  return text as AccessMode;
}

/** The application's access key, or undefined when it has none yet. Read-only. */
export async function accessKey(secrets: SecretStore, applicationId: string): Promise<string | undefined> {
  return (await secrets.read({ applicationId, app: ACCESS_KEY_APP }))?.[ACCESS_KEY_VAR] || undefined;
}

/** The application's access key, created when it has none (`apps create`, `apps update --access`). */
export async function ensureAccessKey(secrets: SecretStore, applicationId: string): Promise<string> {
  return (await accessKey(secrets, applicationId)) ?? rotateAccessKey(secrets, applicationId);
}

/**
 * Replace the application's access key (`previewctl apps rotate-access-key`): every link and cookie
 * signed with the old one is refused from then on (front doors read the key at most a few seconds old).
 * Returns nothing: the key is never shown.
 */
export async function rotateAccessKey(secrets: SecretStore, applicationId: string): Promise<string> {
  const key = randomBytes(32).toString('hex');
  await secrets.write({ applicationId, app: ACCESS_KEY_APP }, { [ACCESS_KEY_VAR]: key });
  return key;
}

/**
 * The links into a protected environment (status `accessUrls`: app → link), each good for
 * ACCESS_TTL_SECONDS; undefined when the application has no key yet (then nobody gets in until
 * `apps rotate-access-key` makes one).
 */
export function accessUrls(
  key: string | undefined,
  scope: { orgId: string; envKey: string },
  urls: Record<string, string>,
  nowMs = Date.now(),
): Record<string, string> | undefined {
  if (!key) return undefined;
  const token = signAccessToken(key, scope, nowMs);
  const out: Record<string, string> = {};
  for (const [app, url] of Object.entries(urls)) out[app] = accessLink(url, token);
  return out;
}

/** A cookie a run's browser carries into a protected preview: for `url`'s host only. */
export interface RunAccessCookie {
  url: string;
  cookie: { name: string; value: string };
}

/**
 * Before a test run: wake the run's environment when it sleeps (`wake`: the local runtime's;
 * absent in AWS, where the request itself wakes it), then the access cookies its browser carries when the
 * environment is protected: one per app origin of the environment, host-only (the browser port's
 * `addCookies` without a domain), so the browser never sends it to another origin. Nothing to configure.
 */
export async function prepareRunAccess(
  deps: { secrets: SecretStore; wake?: (ref: { orgId: string; envKey: string }) => Promise<void> },
  orgId: string,
  target: { applicationId: string; envKey?: string; access?: AccessMode; urls?: Record<string, string> },
  nowMs = Date.now(),
): Promise<RunAccessCookie[]> {
  if (!target.envKey) return [];
  await deps.wake?.({ orgId, envKey: target.envKey });
  if (target.access !== 'protected') return [];
  const key = await accessKey(deps.secrets, target.applicationId);
  if (!key) return [];
  const token = signAccessToken(key, { orgId, envKey: target.envKey }, nowMs);
  const origins = new Set(Object.values(target.urls ?? {}).map((u) => new URL(u).origin));
  return [...origins].map((url) => ({ url, cookie: { name: ACCESS_COOKIE, value: token } }));
}
