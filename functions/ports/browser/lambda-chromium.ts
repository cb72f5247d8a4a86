import { existsSync } from 'node:fs';
import { openPlaywrightSession } from './playwright.js';
import type { Browser, BrowserSession, SessionOptions } from './port.js';

/**
 * @sparticuz/chromium's flags that loosen what a page may do, left out: a run's pages are confined to
 * their preview (issue 23), and these would let a page read other origins (`--disable-web-security`),
 * load http into https pages, or share a process with another site.
 */
export const LOOSENING_FLAGS = new Set([
  '--disable-web-security',
  '--allow-running-insecure-content',
  '--disable-site-isolation-trials',
]);

/** @sparticuz/chromium's flags without the loosening ones. */
export const lambdaChromiumFlags = (args: string[]) =>
  args.filter((a) => !LOOSENING_FLAGS.has(a.split('=')[0]!));

/** Where the stack's ffmpeg layer puts the binary. */
export const LAMBDA_FFMPEG_PATH = '/opt/bin/ffmpeg';

/**
 * The browser in AWS Lambda: playwright-core driving @sparticuz/chromium (a Chromium built for Lambda,
 * unpacked into /tmp on first use; its flags: single process, no sandbox, no GPU). The function needs
 * x86_64, at least 2 GB of memory, a 15-minute timeout, @sparticuz/chromium shipped in its bundle's
 * node_modules (esbuild leaves it external: it carries the browser as files), and ffmpeg at
 * `ffmpegPath` (a layer).
 */
export class LambdaChromium implements Browser {
  constructor(private readonly ffmpegPath: string = LAMBDA_FFMPEG_PATH) {}

  missing(): string | undefined {
    if (!existsSync(this.ffmpegPath))
      return `test runs need ffmpeg at ${this.ffmpegPath} (the stack's ffmpeg layer, or PREVIEW_FFMPEG_PATH)`;
    return undefined;
  }

  async open(opts: SessionOptions): Promise<BrowserSession> {
    const { default: chromium } = await import('@sparticuz/chromium');
    return openPlaywrightSession(
      {
        executablePath: await chromium.executablePath(),
        args: lambdaChromiumFlags(chromium.args),
        ffmpegPath: this.ffmpegPath,
      },
      opts,
    );
  }
}
