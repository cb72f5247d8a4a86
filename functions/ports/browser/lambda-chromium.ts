import { existsSync } from 'node:fs';
import { openPlaywrightSession } from './playwright.js';
import type { Browser, BrowserSession, SessionOptions } from './port.js';

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
        args: chromium.args,
        ffmpegPath: this.ffmpegPath,
      },
      opts,
    );
  }
}
