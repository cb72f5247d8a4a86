import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { openPlaywrightSession } from './playwright.js';
import type { Browser, BrowserSession, SessionOptions } from './port.js';
import { BrowserPool, type LaunchSpec, RunQueue } from './warm-browser.js';

/** Debian's `chromium` package. */
export const DEFAULT_CHROMIUM_PATH = '/usr/bin/chromium';
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

/** An executable by path, or looked up on PATH by name; undefined when there is none. */
export function findExecutable(nameOrPath: string): string | undefined {
  const runnable = (p: string) => {
    try {
      accessSync(p, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (isAbsolute(nameOrPath) || nameOrPath.includes('/'))
    return existsSync(nameOrPath) && runnable(nameOrPath) ? nameOrPath : undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, nameOrPath);
    if (runnable(candidate)) return candidate;
  }
  return undefined;
}

/**
 * What a host lacks to run test runs locally, as the line `npm start` prints and failed runs carry;
 * undefined when chromium and ffmpeg are both there.
 */
export function describeMissingBrowser(
  browserPath = DEFAULT_CHROMIUM_PATH,
  ffmpegPath = 'ffmpeg',
): string | undefined {
  const missing: string[] = [];
  const packages: string[] = [];
  if (!findExecutable(browserPath)) {
    missing.push(`chromium (${browserPath})`);
    packages.push('chromium');
  }
  if (!findExecutable(ffmpegPath)) {
    missing.push(`ffmpeg (${ffmpegPath})`);
    packages.push('ffmpeg');
  }
  if (missing.length === 0) return undefined;
  return (
    `test runs need ${missing.join(' and ')}, which ${missing.length > 1 ? 'are' : 'is'} not installed: ` +
    `install with \`apt-get install -y ${packages.join(' ')}\` (Debian/Ubuntu), or point ` +
    'PREVIEW_BROWSER_PATH / PREVIEW_FFMPEG_PATH at them'
  );
}

/** How many runs the local server runs at once unless PREVIEW_RUN_CONCURRENCY says otherwise. */
export const DEFAULT_RUN_CONCURRENCY = 2;

/**
 * Local browser: playwright-core driving the chromium binary of the host (Debian's package by default).
 * Browsers stay warm between runs (warm-browser.ts: one per parallel run, a fresh context per run,
 * relaunched once dead); up to `concurrency` runs at once, the others wait their turn in order.
 */
export class LocalChromium implements Browser {
  private readonly browserPath: string;
  private readonly ffmpegPath: string;
  private readonly pool: BrowserPool;
  private readonly queue: RunQueue;
  private readonly sessions = new Set<{ abort(): Promise<void> }>();
  private stopping = false;

  constructor(opts: { browserPath?: string; ffmpegPath?: string; concurrency?: number } = {}) {
    this.browserPath = opts.browserPath ?? DEFAULT_CHROMIUM_PATH;
    this.ffmpegPath = opts.ffmpegPath ?? 'ffmpeg';
    const concurrency = opts.concurrency ?? DEFAULT_RUN_CONCURRENCY;
    this.pool = new BrowserPool(async () => this.spec(), concurrency);
    this.queue = new RunQueue(concurrency);
  }

  private spec(): LaunchSpec {
    return {
      executablePath: this.browserPath,
      args: LOCAL_CHROMIUM_FLAGS,
      ffmpegPath: findExecutable(this.ffmpegPath) ?? this.ffmpegPath,
    };
  }

  missing(): string | undefined {
    return describeMissingBrowser(this.browserPath, this.ffmpegPath);
  }

  async open(opts: SessionOptions): Promise<BrowserSession> {
    if (this.stopping) throw new Error('the service is stopping');
    return openPlaywrightSession(this.pool, this.spec(), opts, this.sessions);
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
