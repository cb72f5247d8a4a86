import type { Browser as PwBrowser } from 'playwright-core';
import { NO_PROXY, OriginGuard } from './origin-guard.js';

/** How a browser is launched: its binary and flags, and the ffmpeg that encodes its video. */
export interface LaunchSpec {
  executablePath: string;
  args: string[];
  ffmpegPath: string;
  /** Where frames and traces are kept while a session records (default: the OS temp dir). */
  tmpDir?: string;
  /** Extra environment for the browser process. */
  env?: Record<string, string>;
}

const LAUNCH_TIMEOUT_MS = 30_000;

/** A launched browser and its origin guard, held by one run at a time. */
export interface WarmBrowser {
  browser: PwBrowser;
  guard: OriginGuard;
}

/**
 * Warm browsers: launching Chromium is most of what a short run costs, so a browser outlives
 * its run. Each run takes a browser of the pool (an idle one, else a new launch), opens a fresh context in
 * it (nothing shared between runs: cookies, storage, cache, permissions live in the context) and gives it
 * back when its context closed; up to `keep` idle browsers are kept (the local server: one per parallel
 * run, `PREVIEW_RUN_CONCURRENCY`; a Lambda container: one). A browser that died (crashed, killed) is
 * dropped, and the next run launches a new one.
 *
 * One run per browser at a time, because the request layer of a run's confinement (origin-guard.ts) is
 * browser-wide: Chromium's Fetch domain on the browser target does not say which context a request
 * belongs to, so two runs sharing a browser would have to share their allowed origins.
 */
export class BrowserPool {
  private readonly idle: WarmBrowser[] = [];
  private readonly all = new Set<WarmBrowser>();
  private closed = false;

  constructor(
    private readonly spec: () => Promise<LaunchSpec>,
    private readonly keep: number,
  ) {}

  /** Whether `stop` was called. */
  get stopped(): boolean {
    return this.closed;
  }

  /** A live browser for one run: an idle one, else a fresh launch. */
  async take(): Promise<WarmBrowser> {
    if (this.closed) throw new Error('the service is stopping');
    while (this.idle.length) {
      const warm = this.idle.pop()!;
      if (warm.browser.isConnected()) return warm;
      this.all.delete(warm);
    }
    const warm = await this.launch();
    if (this.closed) {
      await warm.browser.close().catch(() => undefined);
      throw new Error('the service is stopping');
    }
    return warm;
  }

  /** Give a browser back once its run's context closed: kept warm, or closed when enough are. */
  async give(warm: WarmBrowser): Promise<void> {
    warm.guard.use([]);
    if (!this.closed && warm.browser.isConnected() && this.idle.length < this.keep) {
      this.idle.push(warm);
      return;
    }
    this.all.delete(warm);
    await warm.browser.close().catch(() => undefined);
  }

  /** Close every browser, idle or in use, and launch no more (the host is stopping). */
  async stop(): Promise<void> {
    this.closed = true;
    this.idle.length = 0;
    await Promise.all([...this.all].map((w) => w.browser.close().catch(() => undefined)));
    this.all.clear();
  }

  private async launch(): Promise<WarmBrowser> {
    const spec = await this.spec();
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({
      executablePath: spec.executablePath,
      // Playwright gives every launch a fresh, temporary user-data dir (and removes it on close).
      args: spec.args,
      // Every context sets its own proxy (its run's origins); this one, dead, is for anything else.
      proxy: { server: NO_PROXY, bypass: '<-loopback>' },
      headless: true,
      timeout: LAUNCH_TIMEOUT_MS,
      // The host process (the local server, a Lambda) keeps its own signal handling.
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
      ...(spec.env ? { env: { ...process.env, ...spec.env } } : {}),
    });
    const guard = new OriginGuard();
    try {
      await guard.attach(browser);
    } catch (err) {
      await browser.close().catch(() => undefined);
      throw err;
    }
    const warm = { browser, guard };
    this.all.add(warm);
    browser.on('disconnected', () => {
      this.all.delete(warm);
      const i = this.idle.indexOf(warm);
      if (i >= 0) this.idle.splice(i, 1);
    });
    return warm;
  }
}

/**
 * Turns of the local server's runs (warm browsers): up to `size` at once, the others wait in the order they
 * asked. `stop` refuses the waiting ones and any later ask.
 */
export class RunQueue {
  private active = 0;
  private readonly waiting: { resolve: (t: { release(): void }) => void; reject: (e: Error) => void }[] = [];
  private closed = false;

  constructor(private readonly size: number) {}

  /** Resolves when it is this caller's turn; `release()` ends the turn (once). */
  turn(): Promise<{ release(): void }> {
    if (this.closed) return Promise.reject(new Error('the service is stopping'));
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.next();
    });
  }

  /** Runs waiting for a turn. */
  get queued(): number {
    return this.waiting.length;
  }

  stop(): void {
    this.closed = true;
    for (const w of this.waiting.splice(0)) w.reject(new Error('the service is stopping'));
  }

  private next(): void {
    while (this.active < this.size && this.waiting.length) {
      const w = this.waiting.shift()!;
      this.active++;
      let released = false;
      w.resolve({
        release: () => {
          if (released) return;
          released = true;
          this.active--;
          this.next();
        },
      });
    }
  }
}
