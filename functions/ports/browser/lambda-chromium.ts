import { existsSync } from 'node:fs';
import { openPlaywrightSession } from './playwright.js';
import type { Browser, BrowserSession, SessionOptions } from './port.js';
import { BrowserPool, type LaunchSpec } from './warm-browser.js';

/**
 * @sparticuz/chromium's flags that loosen what a page may do, left out: a run's pages are confined to
 * their preview (run confinement), and these would let a page read other origins (`--disable-web-security`),
 * load http into https pages, or share a process with another site.
 */
export const LOOSENING_FLAGS = new Set([
  '--disable-web-security',
  '--allow-running-insecure-content',
  '--disable-site-isolation-trials',
]);

/**
 * @sparticuz/chromium's `--single-process`, left out too: a single-process Chromium cannot open a second
 * browser context once the first closed ("Target page, context or browser has been closed"), and the
 * warm browser opens a fresh context per run; the multi-process browser runs in Lambda with
 * the flags that remain (`--no-zygote`, `--disable-dev-shm-usage`, no sandbox).
 */
export const WARM_INCOMPATIBLE_FLAGS = new Set(['--single-process']);

/** @sparticuz/chromium's flags without the loosening ones and those a warm browser cannot run with. */
export const lambdaChromiumFlags = (args: string[]) =>
  args.filter(
    (a) => !LOOSENING_FLAGS.has(a.split('=')[0]!) && !WARM_INCOMPATIBLE_FLAGS.has(a.split('=')[0]!),
  );

/** Where the stack's ffmpeg layer puts the binary. */
export const LAMBDA_FFMPEG_PATH = '/opt/bin/ffmpeg';

/**
 * The browser in AWS Lambda: playwright-core driving @sparticuz/chromium (a Chromium built for Lambda,
 * unpacked into /tmp on first use; its flags: single process, no sandbox, no GPU). The browser stays warm
 * in the container between invocations (one run at a time: a fresh context per run, relaunched once
 * dead; warm-browser.ts). The function needs x86_64, at least 2 GB of memory, a 15-minute timeout,
 * @sparticuz/chromium shipped in its bundle's node_modules (esbuild leaves it external: it carries the
 * browser as files), and ffmpeg at `ffmpegPath` (a layer).
 */
export class LambdaChromium implements Browser {
  private readonly pool = new BrowserPool(() => this.spec(), 1);
  private readonly sessions = new Set<{ abort(): Promise<void> }>();

  constructor(private readonly ffmpegPath: string = LAMBDA_FFMPEG_PATH) {}

  private async spec(): Promise<LaunchSpec> {
    const { default: chromium } = await import('@sparticuz/chromium');
    return {
      executablePath: await chromium.executablePath(),
      args: lambdaChromiumFlags(chromium.args),
      ffmpegPath: this.ffmpegPath,
    };
  }

  missing(): string | undefined {
    if (!existsSync(this.ffmpegPath))
      return `test runs need ffmpeg at ${this.ffmpegPath} (the stack's ffmpeg layer, or PREVIEW_FFMPEG_PATH)`;
    return undefined;
  }

  async open(opts: SessionOptions): Promise<BrowserSession> {
    return openPlaywrightSession(this.pool, { ...(await this.spec()) }, opts, this.sessions);
  }

  /** Close the warm browser (tests). */
  async stop(): Promise<void> {
    await Promise.all([...this.sessions].map((s) => s.abort()));
    await this.pool.stop();
  }
}
