import { lambdaChromiumFlags } from './lambda-chromium.js';
import {
  chooseBrowser,
  chooseFfmpeg,
  DEFAULT_CHROMIUM_PATH,
  describeMissingTools,
  type ToolLookup,
} from './local-tools.js';
import { openPlaywrightSession } from './playwright.js';
import type { Browser, BrowserSession, SessionOptions } from './port.js';
import { BrowserPool, type LaunchSpec, RunQueue } from './warm-browser.js';

/**
 * Flags that let chromium run headless and offline as any user in a container: no sandbox (no user
 * namespaces needed), no GPU, no first-run UI, and nothing that phones home (background networking,
 * component updates, sync). Playwright adds a fresh temporary `--user-data-dir` to every launch.
 */
export const LOCAL_CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * The packaged Chromium's flags: @sparticuz/chromium's own (its headless shell, software GL) without those
 * the Lambda adapter leaves out, and the local ones that keep it offline (not `--headless` nor
 * `--disable-gpu`: its own headless mode and GL stand).
 */
export const packagedChromiumFlags = (args: string[]) => {
  const own = lambdaChromiumFlags(args);
  const local = LOCAL_CHROMIUM_FLAGS.filter(
    (f) => f !== '--headless' && f !== '--disable-gpu' && !own.includes(f),
  );
  return [...own, ...local];
};

/** How many runs the local server runs at once unless PREVIEW_RUN_CONCURRENCY says otherwise. */
export const DEFAULT_RUN_CONCURRENCY = 2;

export { DEFAULT_CHROMIUM_PATH, findExecutable } from './local-tools.js';

/**
 * Local browser: playwright-core driving the chromium binary of the host (Debian's package by default,
 * else the packaged @sparticuz/chromium with the Lambda adapter's flags and these; local-tools.ts says
 * which, and which ffmpeg).
 * Browsers stay warm between runs (warm-browser.ts: one per parallel run, a fresh context per run,
 * relaunched once dead); up to `concurrency` runs at once, the others wait their turn in order.
 */
export class LocalChromium implements Browser {
  private readonly lookup: ToolLookup;
  private readonly pool: BrowserPool;
  private readonly queue: RunQueue;
  private readonly sessions = new Set<{ abort(): Promise<void> }>();
  private stopping = false;

  constructor(opts: ToolLookup & { concurrency?: number } = {}) {
    const { concurrency = DEFAULT_RUN_CONCURRENCY, ...lookup } = opts;
    this.lookup = lookup;
    this.pool = new BrowserPool(() => this.spec(), concurrency);
    this.queue = new RunQueue(concurrency);
  }

  private async spec(): Promise<LaunchSpec> {
    const ffmpeg = chooseFfmpeg(this.lookup);
    const ffmpegPath = ffmpeg?.path ?? this.lookup.ffmpegPath ?? 'ffmpeg';
    const browser = chooseBrowser(this.lookup);
    if (browser?.origin === 'packaged') {
      const { default: chromium } = await import('@sparticuz/chromium');
      return {
        executablePath: await chromium.executablePath(),
        // Its own flags (headless shell, software GL) without the loosening ones, then the offline ones.
        args: packagedChromiumFlags(chromium.args),
        ffmpegPath,
      };
    }
    return {
      executablePath: browser?.path ?? this.lookup.browserPath ?? DEFAULT_CHROMIUM_PATH,
      args: LOCAL_CHROMIUM_FLAGS,
      ffmpegPath,
    };
  }

  missing(): string | undefined {
    return describeMissingTools(this.lookup);
  }

  /** What a launch would run (tests: which binary, which flags). */
  launchSpec(): Promise<LaunchSpec> {
    return this.spec();
  }

  async open(opts: SessionOptions): Promise<BrowserSession> {
    if (this.stopping) throw new Error('the service is stopping');
    return openPlaywrightSession(this.pool, await this.spec(), opts, this.sessions);
  }

  turn(): Promise<{ release(): void }> {
    return this.queue.turn();
  }

  /** Runs waiting for their turn. */
  get queued(): number {
    return this.queue.queued;
  }

  /** Close the browsers (of runs in progress too), and open no more (the local server is stopping). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.queue.stop();
    await Promise.all([...this.sessions].map((s) => s.abort()));
    await this.pool.stop();
  }
}
