import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, CDPSession, JSHandle, Page } from 'playwright-core';
import { navigationRefused, originAllowed, originLabel, requestRefused } from '../../shared/origins.js';
import { COLLECT_FEATURES, CSS_PATH } from './element-features.js';
import { NO_PROXY, type OriginGuard } from './origin-guard.js';
import {
  type BrowserSession,
  type HealCandidates,
  MAX_EVENT_TEXT,
  MAX_HEALED_HTML,
  MAX_STEP_EVENTS,
  type PageEvent,
  type PageEvents,
  type Recording,
  type Refusals,
  type RefusedRequest,
  type SessionCookie,
  type SessionOptions,
} from './port.js';
import { ScreencastRecorder } from './screencast.js';
import { maskTrace } from './trace-zip.js';
import type { BrowserPool, LaunchSpec, WarmBrowser } from './warm-browser.js';

export { NO_PROXY } from './origin-guard.js';
export type { LaunchSpec } from './warm-browser.js';

/** Collapse whitespace, so text matches however the page wraps or indents it. */
const normalize = (text: string) => text.replace(/\s+/g, ' ').trim();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const cut = (text: string) => (text.length > MAX_EVENT_TEXT ? `${text.slice(0, MAX_EVENT_TEXT - 1)}…` : text);

/** What the page reports, kept per step (see PageEvent). */
class EventLog {
  private events: PageEvent[] = [];
  private dropped = 0;

  add(kind: PageEvent['kind'], level: string, text: string): void {
    if (this.events.length >= MAX_STEP_EVENTS) this.dropped++;
    else this.events.push({ kind, level, text: cut(text) });
  }

  take(): PageEvents {
    const taken = { events: this.events, dropped: this.dropped };
    this.events = [];
    this.dropped = 0;
    return taken;
  }

  watch(page: Page): void {
    page.on('console', (m) => {
      const type = m.type();
      // Chromium's own line for a 4xx/5xx answer repeats the request event below.
      if ((type === 'error' || type === 'warning') && !m.text().startsWith('Failed to load resource:'))
        this.add('console', type, m.text());
    });
    page.on('pageerror', (err) => this.add('page-error', 'error', err.message));
    page.on('requestfailed', (r) => {
      // The run's own refusals are said by the step itself (the origin guard's message).
      const failure = r.failure()?.errorText ?? 'failed';
      if (failure.includes('ERR_BLOCKED_BY_CLIENT')) return;
      this.add('request', 'failed', `${r.method()} ${r.url()}: ${failure}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400)
        this.add('request', String(r.status()), `${r.request().method()} ${r.url()} → ${r.status()}`);
    });
  }
}

/* The in-page scripts as functions (Playwright sends a function's source and calls it with its argument). */
const collectFeatures = new Function(`return ${COLLECT_FEATURES}`)() as (html: string) => unknown;
const cssPath = new Function(`return ${CSS_PATH}`)() as (el: unknown) => string;

/** A session on a Playwright page (see the port). */
class PlaywrightSession implements BrowserSession {
  private crash: string | undefined;
  private closing = false;
  private grouped = false;
  /** The elements of the last `healCandidates`, kept in the page for `pinSelector`. */
  private collected: JSHandle | undefined;
  private readonly events = new EventLog();
  private readonly guard: OriginGuard;
  /** CDP's ids of the frames the page holds besides its main frame (a refused one is a frame, not a popup). */
  private readonly frames = new Set<string>();
  private readonly onDisconnect = () => {
    if (!this.closing) this.crash ??= 'the browser exited unexpectedly (crashed or was killed)';
  };

  constructor(
    private readonly warm: WarmBrowser,
    private readonly context: BrowserContext,
    private readonly page: Page,
    private readonly cdp: CDPSession,
    private readonly recorder: ScreencastRecorder | undefined,
    private readonly tracing: boolean,
    private readonly spec: LaunchSpec,
    /** CDP's id of the page's main frame: a refused document of this frame is the page's own navigation. */
    private readonly mainFrameId: string,
    private readonly onClose: () => Promise<void>,
  ) {
    this.guard = warm.guard;
    cdp.on('Page.frameAttached', (e) => this.frames.add(e.frameId));
    warm.browser.on('disconnected', this.onDisconnect);
    page.on('crash', () => {
      this.crash ??= 'the page crashed in the browser';
    });
    this.events.watch(page);
  }

  /** Let a navigation an action started finish loading (bounded; a page that keeps loading is fine). */
  private async settle(timeoutMs: number): Promise<void> {
    await this.page.waitForLoadState('load', { timeout: Math.min(timeoutMs, 5_000) }).catch(() => undefined);
  }

  async setExtraHTTPHeaders(headers: Record<string, string>): Promise<void> {
    await this.context.setExtraHTTPHeaders(headers);
  }

  async beginStep(title: string): Promise<void> {
    if (!this.tracing || this.crash) return;
    if (this.grouped) await this.context.tracing.groupEnd().catch(() => undefined);
    this.grouped = await this.context.tracing.group(title).then(
      () => true,
      () => false,
    );
  }

  takeEvents(): PageEvents {
    return this.events.take();
  }

  async addCookies(cookies: SessionCookie[], url: string): Promise<void> {
    await this.context.addCookies(
      cookies.map((c) =>
        c.domain
          ? { name: c.name, value: c.value, domain: c.domain, path: c.path ?? '/' }
          : c.path
            ? { name: c.name, value: c.value, domain: new URL(url).hostname, path: c.path }
            : { name: c.name, value: c.value, url },
      ),
    );
  }

  async goto(url: string, timeoutMs: number): Promise<void> {
    // Refused before the browser sees it: nothing of the target is loaded, shown or recorded.
    if (!originAllowed(url, this.guard.origins)) throw new Error(navigationRefused(url));
    await this.page.goto(url, { timeout: timeoutMs, waitUntil: 'load' });
  }

  takeRefusals(): Refusals {
    const { refusals, dropped } = this.guard.take();
    let navigation: string | undefined;
    const requests = new Map<string, RefusedRequest>();
    for (const r of refusals) {
      // The page's own navigation: its main frame's document (a frame-less one is judged the same way).
      if (r.document && (r.frameId === undefined || r.frameId === this.mainFrameId)) {
        navigation ??= navigationRefused(r.url);
        continue;
      }
      const kind = r.document ? (this.frames.has(r.frameId!) ? 'frame' : 'popup') : r.kind;
      const message = requestRefused(r.url, kind);
      const seen = requests.get(message);
      if (seen) seen.count++;
      else requests.set(message, { origin: originLabel(r.url), kind, message, count: 1 });
    }
    return {
      ...(navigation ? { navigation } : {}),
      requests: [...requests.values()],
      ...(dropped ? { dropped } : {}),
    };
  }

  async click(selector: string, timeoutMs: number): Promise<void> {
    await this.page.locator(selector).first().click({ timeout: timeoutMs });
    await this.settle(timeoutMs);
  }

  async fill(selector: string, value: string, timeoutMs: number): Promise<void> {
    await this.page.locator(selector).first().fill(value, { timeout: timeoutMs });
  }

  async press(key: string, selector: string | undefined, timeoutMs: number): Promise<void> {
    if (selector) await this.page.locator(selector).first().press(key, { timeout: timeoutMs });
    else await this.page.keyboard.press(key);
    await this.settle(timeoutMs);
  }

  async probe(selector: string, timeoutMs: number): Promise<boolean> {
    return this.page
      .locator(selector)
      .first()
      .waitFor({ state: 'attached', timeout: timeoutMs })
      .then(
        () => true,
        (err: Error) => {
          if (err.name === 'TimeoutError') return false;
          throw err;
        },
      );
  }

  async healCandidates(html: string): Promise<HealCandidates> {
    await this.collected?.dispose().catch(() => undefined);
    this.collected = await this.page.evaluateHandle(collectFeatures, html);
    return (await this.collected.evaluate((c: { data: HealCandidates }) => c.data)) as HealCandidates;
  }

  async pinSelector(
    index: number,
    proposals: string[],
  ): Promise<{ selector: string; html: string } | undefined> {
    if (!this.collected) return undefined;
    const el = await this.collected.evaluateHandle((c: { els: unknown[] }, i: number) => c.els[i], index);
    try {
      const connected = await el.evaluate(
        (e: unknown) => (e as { isConnected?: boolean })?.isConnected === true,
      );
      if (!connected) return undefined;
      const html = (await el.evaluate((e: unknown) => (e as { outerHTML: string }).outerHTML)).slice(
        0,
        MAX_HEALED_HTML,
      );
      for (const selector of proposals) {
        const only = await this.page
          .locator(selector)
          .evaluateAll((els: unknown[], t: unknown) => els.length === 1 && els[0] === t, el)
          .catch(() => false);
        if (only) return { selector, html };
      }
      return { selector: await el.evaluate(cssPath), html };
    } finally {
      await el.dispose().catch(() => undefined);
    }
  }

  async waitVisible(selector: string, timeoutMs: number): Promise<void> {
    await this.page.locator(selector).first().waitFor({ state: 'visible', timeout: timeoutMs });
  }

  async waitForText(text: string, selector: string | undefined, timeoutMs: number): Promise<boolean> {
    const wanted = normalize(text);
    const deadline = Date.now() + timeoutMs;
    const locator = this.page.locator(selector || 'body').first();
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return false;
      const seen = await locator.innerText({ timeout: remaining }).catch((err: Error) => {
        // No such element yet (keep waiting) is a timeout; anything else (a crash) is the step's error.
        if (err.name === 'TimeoutError') return undefined;
        throw err;
      });
      if (seen !== undefined && normalize(seen).includes(wanted)) return true;
      await sleep(Math.min(100, Math.max(deadline - Date.now(), 0)));
    }
  }

  /**
   * The viewport as a PNG, through CDP's `Page.captureScreenshot` with `optimizeForSpeed` (a faster PNG
   * encoder): a third of the time of Playwright's `page.screenshot`, which has no such option; a step's
   * screenshot was a fifth of a warm run.
   */
  async screenshot(timeoutMs: number): Promise<Buffer> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the screenshot timed out after ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      const shot = this.cdp.send('Page.captureScreenshot', { format: 'png', optimizeForSpeed: true });
      return Buffer.from((await Promise.race([shot, late])).data, 'base64');
    } finally {
      clearTimeout(timer);
    }
  }

  url(): string {
    return this.page.url();
  }

  crashed(): string | undefined {
    return this.crash;
  }

  /** Close the session's browser and drop the recording (the host is stopping). */
  async abort(): Promise<void> {
    if (this.closing) return;
    this.crash ??= 'the service stopped while the run was running';
    this.closing = true;
    await this.warm.browser.close().catch(() => undefined);
    this.recorder?.discard();
    await this.release();
  }

  async close(opts: { mask?: (text: string) => string } = {}): Promise<Recording> {
    if (this.closing) return {};
    this.closing = true;
    const recording: Recording = {};
    const problems: string[] = [];
    try {
      if (this.recorder && !this.crash) await this.recorder.stop();
      if (this.tracing && !this.crash) {
        const dir = mkdtempSync(join(this.spec.tmpDir ?? tmpdir(), 'run-trace-'));
        try {
          if (this.grouped) await this.context.tracing.groupEnd().catch(() => undefined);
          const path = join(dir, 'trace.zip');
          await this.context.tracing.stop({ path });
          const raw = readFileSync(path);
          recording.trace = opts.mask ? await maskTrace(raw, opts.mask) : raw;
        } catch (err) {
          problems.push(`no trace: ${(err as Error).message.split('\n')[0]}`);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }
      await this.context.close().catch(() => undefined);
      if (this.recorder) {
        try {
          const video = await this.recorder.encode();
          if (video) recording.video = video;
        } catch (err) {
          problems.push(`no video: ${(err as Error).message}`);
        }
      }
      if (problems.length) recording.problems = problems;
      return recording;
    } finally {
      this.recorder?.discard();
      await this.release();
    }
  }

  private async release(): Promise<void> {
    this.warm.browser.off('disconnected', this.onDisconnect);
    await this.onClose();
  }
}

/**
 * Open a session for one run in a browser of `pool`: a fresh context confined to `opts.allowedOrigins`
 * (its proxy lets only their host:ports through; the browser's guard fails every other request), with a
 * video and a trace when asked for. Closing it gives the browser back to the pool.
 */
export async function openPlaywrightSession(
  pool: BrowserPool,
  spec: LaunchSpec,
  opts: SessionOptions,
  sessions: Set<{ abort(): Promise<void> }>,
): Promise<BrowserSession> {
  const warm = await pool.take();
  warm.guard.use(opts.allowedOrigins);
  let context: BrowserContext | undefined;
  try {
    context = await warm.browser.newContext({
      viewport: opts.viewport,
      proxy: { server: NO_PROXY, bypass: warm.guard.bypass() },
      ignoreHTTPSErrors: true,
      // A service worker could answer for the page out of the interception's sight; nothing is saved.
      serviceWorkers: 'block',
      acceptDownloads: false,
    });
    warm.guard.watch(context);
    // The trace starts while the page opens (it records the page from its first action either way).
    const [page] = await Promise.all([
      context.newPage(),
      opts.trace && context.tracing.start({ screenshots: true, snapshots: true, sources: false }),
    ]);
    const cdp = await context.newCDPSession(page);
    // The main frame's id, and the frames the page attaches (its events: Page.enable on this session).
    const [{ frameTree }] = await Promise.all([cdp.send('Page.getFrameTree'), cdp.send('Page.enable')]);
    let recorder: ScreencastRecorder | undefined;
    if (opts.video) {
      recorder = new ScreencastRecorder(cdp, spec.tmpDir ?? tmpdir(), spec.ffmpegPath);
      await recorder.start(opts.viewport);
    }
    const session: PlaywrightSession = new PlaywrightSession(
      warm,
      context,
      page,
      cdp,
      recorder,
      opts.trace === true,
      spec,
      frameTree.frame.id,
      async () => {
        sessions.delete(session);
        await pool.give(warm);
      },
    );
    sessions.add(session);
    return session;
  } catch (err) {
    await context?.close().catch(() => undefined);
    await pool.give(warm);
    // The host stopped (and closed its browsers) while this session was opening: say that, not Playwright's
    // "Target page, context or browser has been closed".
    if (pool.stopped) throw new Error('the service stopped while the run was starting');
    throw err;
  }
}
