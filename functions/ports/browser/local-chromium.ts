import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { closeAllSessions, openPlaywrightSession } from './playwright.js';
import type { Browser, BrowserSession, SessionOptions } from './port.js';

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

/** Local browser: playwright-core driving the chromium binary of the host (Debian's package by default). */
export class LocalChromium implements Browser {
  private readonly browserPath: string;
  private readonly ffmpegPath: string;

  constructor(opts: { browserPath?: string; ffmpegPath?: string } = {}) {
    this.browserPath = opts.browserPath ?? DEFAULT_CHROMIUM_PATH;
    this.ffmpegPath = opts.ffmpegPath ?? 'ffmpeg';
  }

  missing(): string | undefined {
    return describeMissingBrowser(this.browserPath, this.ffmpegPath);
  }

  async open(opts: SessionOptions): Promise<BrowserSession> {
    if (this.stopping) throw new Error('the service is stopping');
    const session = await openPlaywrightSession(
      {
        executablePath: this.browserPath,
        args: LOCAL_CHROMIUM_FLAGS,
        ffmpegPath: findExecutable(this.ffmpegPath) ?? this.ffmpegPath,
      },
      opts,
    );
    // Launched while the service was stopping: closed like the others were.
    if (this.stopping) await closeAllSessions();
    return session;
  }

  private stopping = false;

  /** Close the browsers of runs still in progress, and open no more (the local server is stopping). */
  async stop(): Promise<void> {
    this.stopping = true;
    await closeAllSessions();
  }
}
