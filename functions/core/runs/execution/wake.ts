import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { RunAccessCookie } from '../../applications/index.js';
import type { RunTarget, RunWake } from '../store.js';

/*
 * Cold starts: before a run's first step (and its scenario's `up`, the first Environment Factory call) the
 * preview is woken and each of its apps is asked until it answers, within a bound, so a preview that
 * slept does not fail the first step that meets it. Locally the runtime's front door wakes it (`wake`,
 * which resolves once its apps answer their readiness checks); on EKS a request wakes it (KEDA's HTTP
 * add-on holds it at the interceptor while the app scales from zero), so the asking is the waking. The
 * gateway or the interceptor may answer 502, 503 or 504 while the app comes up (the add-on's first request
 * after a long idle can time out): those mean "not yet", anything else is the app answering.
 */

/** Answers that mean the app behind the route is not up yet (gateway or interceptor speaking). */
const NOT_YET = new Set([502, 503, 504]);
/** Pause between two asks of an app that did not answer. */
const ASK_EVERY_MS = 500;
/** At most this long per ask (a request the interceptor holds while the app scales from zero). */
const ASK_TIMEOUT_MS = 15_000;

/** What waking a preview takes. */
export interface WakeDeps {
  /** The runtime's own wake (local front door); absent on EKS, where the request wakes the app. */
  wake?: (ref: { orgId: string; envKey: string }) => Promise<void>;
  now?: () => number;
  /** Pause between asks (tests). */
  askEveryMs?: number;
}

/** Which preview, how to reach each app, and until when to wait. */
export interface WakeInput {
  orgId: string;
  envKey: string;
  /** app → its public URL. */
  urls: Record<string, string>;
  /**
   * Where the service's own calls reach each app, read once the runtime woke it (local: the apps' own
   * ports, behind no front door); an app it names is asked there, the others at `urls`.
   */
  serviceUrls?: () => Promise<Record<string, string> | undefined>;
  /** A protected preview's access cookies, each sent only to its own origin. */
  access?: RunAccessCookie[];
  /** Wait at most this long (the setting, already cut to the run's remaining time). */
  timeoutMs: number;
  /** The setting's name and value, for the error (`PREVIEW_WAKE_TIMEOUT_SECONDS`). */
  setting: string;
}

/** The preview did not wake in time: the environment failed the run, not a step. */
export class PreviewNotAwake extends Error {
  override name = 'PreviewNotAwake';
}

/**
 * Wake the run's preview and wait until each app answers.
 * Steps: the runtime's `wake` (when it has one), bounded by the deadline; then every app asked at once
 * (GET of its URL, redirects not followed, its origin's access cookie) every half second until it gives
 * an answer that is not 502/503/504, each ask bounded by the time left (at its service address when the
 * runtime has one). Returns how long it all took and when each app answered (ms from the start), and the
 * service addresses read. Throws `PreviewNotAwake` naming the environment, the bound
 * and its setting, the apps that never answered and what each last said.
 */
export async function wakePreview(
  deps: WakeDeps,
  input: WakeInput,
): Promise<{ wake: RunWake; serviceUrls?: Record<string, string> }> {
  const now = deps.now ?? Date.now;
  const start = now();
  const deadline = start + input.timeoutMs;
  const within = `within ${seconds(input.timeoutMs)} (${input.setting})`;
  const name = `the preview environment ${input.envKey}`;
  if (deps.wake) {
    let timer: NodeJS.Timeout | undefined;
    const woke = deps.wake({ orgId: input.orgId, envKey: input.envKey }).then(
      () => 'woke' as const,
      (err: Error) => err,
    );
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), Math.max(0, deadline - now()));
    });
    const outcome = await Promise.race([woke, late]);
    clearTimeout(timer);
    if (outcome === 'late') throw new PreviewNotAwake(`${name} did not wake ${within}`);
    if (outcome instanceof Error) throw new PreviewNotAwake(`${name} could not be woken: ${outcome.message}`);
  }
  const service = await input.serviceUrls?.();
  const apps: Record<string, number> = {};
  const last: Record<string, string> = {};
  // Every app at once: each scales from zero on its own.
  await Promise.all(
    Object.entries(input.urls).map(async ([app, publicUrl]) => {
      const url = service?.[app] ?? publicUrl;
      for (;;) {
        const left = deadline - now();
        if (left <= 0) return;
        const said = await ask(url, cookieFor(url, input.access ?? []), Math.min(left, ASK_TIMEOUT_MS));
        if (said === true) {
          apps[app] = now() - start;
          return;
        }
        last[app] = said;
        const pause = Math.min(deps.askEveryMs ?? ASK_EVERY_MS, deadline - now());
        if (pause > 0) await new Promise((r) => setTimeout(r, pause));
      }
    }),
  );
  const silent = Object.keys(input.urls).filter((app) => apps[app] === undefined);
  if (silent.length)
    throw new PreviewNotAwake(
      `${name} did not wake ${within}: ${silent
        .sort()
        .map((app) => `app ${app} never answered (last: ${last[app] ?? 'not asked'})`)
        .join('; ')}`,
    );
  return { wake: { waitedMs: now() - start, apps }, ...(service ? { serviceUrls: service } : {}) };
}

/**
 * One ask: `true` when the app answered, else what was met instead (a status, or the error's code). Node's
 * own http/https client, a connection each (no pool left open to the app, no redirect followed).
 */
function ask(url: string, cookie: string | undefined, timeoutMs: number): Promise<true | string> {
  return new Promise((resolve) => {
    const send = url.startsWith('https:') ? httpsRequest : httpRequest;
    const req = send(url, { method: 'GET', agent: false, headers: cookie ? { cookie } : {} }, (res) => {
      res.resume();
      resolve(NOT_YET.has(res.statusCode ?? 0) ? `${res.statusCode}` : true);
    });
    req.setTimeout(timeoutMs, () => {
      req.destroy();
      resolve('no answer in time');
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.name));
    req.end();
  });
}

/** The access cookies for `url`'s origin, as a Cookie header (never another origin's). */
function cookieFor(url: string, access: RunAccessCookie[]): string | undefined {
  const origin = new URL(url).origin;
  const mine = access.filter((a) => new URL(a.url).origin === origin);
  return mine.length ? mine.map((a) => `${a.cookie.name}=${a.cookie.value}`).join('; ') : undefined;
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/**
 * The apps a run needs awake: the one its first page is on, and the Environment Factory's app when the
 * run has a scenario (its `up`); the preview's other apps are not waited for (one of them down is a
 * step's failure when a step meets it, not the environment's).
 */
export function neededApps(target: RunTarget, scenario: boolean): Record<string, string> {
  const urls = target.urls ?? {};
  const needed: Record<string, string> = {};
  for (const [app, url] of Object.entries(urls)) if (url === target.appUrl) needed[app] = url;
  if (!Object.keys(needed).length) needed.app = target.appUrl;
  const factoryApp = target.factory?.app;
  if (scenario && factoryApp && urls[factoryApp]) needed[factoryApp] = urls[factoryApp];
  return needed;
}
