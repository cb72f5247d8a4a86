import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, CDPSession, Page, Browser as PwBrowser } from 'playwright-core';
import { hostPort, navigationRefused, originAllowed, requestRefused } from '../../shared/origins.js';
import {
  type BrowserSession,
  ENCODE_TIMEOUT_MS,
  type SessionCookie,
  type SessionOptions,
  type Video,
} from './port.js';

/** How a browser is launched: its binary and flags, and the ffmpeg that encodes its video. */
export interface LaunchSpec {
  executablePath: string;
  args: string[];
  ffmpegPath: string;
  /** Where frames are kept while a session records (default: the OS temp dir). */
  tmpDir?: string;
  /** Extra environment for the browser process. */
  env?: Record<string, string>;
}

/** Frames per second of the encoded video (the screencast only sends a frame when the page changes). */
const VIDEO_FPS = 10;
const LAUNCH_TIMEOUT_MS = 30_000;

/** Collapse whitespace, so text matches however the page wraps or indents it. */
const normalize = (text: string) => text.replace(/\s+/g, ' ').trim();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The video of a session, from Chrome's screencast (CDP `Page.startScreencast`): each JPEG frame the
 * page paints is kept with the time it came, and on close ffmpeg turns them into an H.264 MP4 in which
 * each frame lasts until the next one came (the last until the session ended), so the video is as long
 * as the session. Playwright's own `recordVideo` needs a Playwright-built ffmpeg that cannot be
 * downloaded offline; this needs only a system ffmpeg.
 */
class ScreencastRecorder {
  private readonly dir: string;
  private readonly frames: { file: string; at: number }[] = [];
  private endedAt = 0;
  private stopped = false;

  constructor(
    private readonly cdp: CDPSession,
    tmpDir: string,
  ) {
    this.dir = mkdtempSync(join(tmpDir, 'run-frames-'));
  }

  async start(viewport: { width: number; height: number }): Promise<void> {
    this.cdp.on('Page.screencastFrame', (frame) => {
      if (this.stopped) return;
      const file = join(this.dir, `f${String(this.frames.length).padStart(6, '0')}.jpg`);
      writeFileSync(file, Buffer.from(frame.data, 'base64'));
      this.frames.push({ file, at: Date.now() });
      this.cdp.send('Page.screencastFrameAck', { sessionId: frame.sessionId }).catch(() => undefined);
    });
    await this.cdp.send('Page.startScreencast', {
      format: 'jpeg',
      quality: 80,
      maxWidth: viewport.width,
      maxHeight: viewport.height,
      everyNthFrame: 1,
    });
  }

  async stop(): Promise<void> {
    this.endedAt = Date.now();
    await this.cdp.send('Page.stopScreencast').catch(() => undefined);
    this.stopped = true;
  }

  async encode(ffmpegPath: string): Promise<Video | undefined> {
    try {
      if (this.frames.length === 0) return undefined;
      const end = this.endedAt || Date.now();
      const lines = ['ffconcat version 1.0'];
      this.frames.forEach((f, i) => {
        const next = this.frames[i + 1]?.at ?? end;
        lines.push(`file '${f.file}'`, `duration ${(Math.max(next - f.at, 1) / 1000).toFixed(3)}`);
      });
      // The concat demuxer ignores the last entry's duration unless the file is listed once more.
      lines.push(`file '${this.frames[this.frames.length - 1]!.file}'`);
      const list = join(this.dir, 'frames.txt');
      writeFileSync(list, `${lines.join('\n')}\n`);
      const out = join(this.dir, 'video.mp4');
      await runFfmpeg(ffmpegPath, [
        '-hide_banner',
        '-loglevel',
        'error',
        '-y',
        '-f',
        'concat',
        '-safe',
        '0',
        '-i',
        list,
        '-vf',
        `fps=${VIDEO_FPS},scale=trunc(iw/2)*2:trunc(ih/2)*2,format=yuv420p`,
        '-c:v',
        'libx264',
        '-preset',
        'veryfast',
        '-movflags',
        '+faststart',
        '-an',
        out,
      ]);
      return {
        body: readFileSync(out),
        contentType: 'video/mp4',
        extension: 'mp4',
        durationMs: end - this.frames[0]!.at,
      };
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }

  discard(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function runFfmpeg(path: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(path, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      if (stderr.length < 4000) stderr += c.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), ENCODE_TIMEOUT_MS);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`ffmpeg could not start (${path}): ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`ffmpeg failed (${signal ?? `exit ${code}`}): ${stderr.trim().slice(0, 500)}`));
    });
  });
}

/** A session on a Playwright page (see the port). */
class PlaywrightSession implements BrowserSession {
  private crash: string | undefined;
  private closing = false;

  constructor(
    private readonly browser: PwBrowser,
    private readonly page: Page,
    private readonly recorder: ScreencastRecorder | undefined,
    private readonly ffmpegPath: string,
    private readonly guard: OriginGuard,
    private readonly onClose: () => void,
  ) {
    browser.on('disconnected', () => {
      if (!this.closing) this.crash ??= 'the browser exited unexpectedly (crashed or was killed)';
    });
    page.on('crash', () => {
      this.crash ??= 'the page crashed in the browser';
    });
  }

  /** Let a navigation an action started finish loading (bounded; a page that keeps loading is fine). */
  private async settle(timeoutMs: number): Promise<void> {
    await this.page.waitForLoadState('load', { timeout: Math.min(timeoutMs, 5_000) }).catch(() => undefined);
  }

  async setExtraHTTPHeaders(headers: Record<string, string>): Promise<void> {
    await this.page.context().setExtraHTTPHeaders(headers);
  }

  async addCookies(cookies: SessionCookie[], url: string): Promise<void> {
    await this.page
      .context()
      .addCookies(
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

  takeRefusal(): string | undefined {
    return this.guard.take();
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

  async screenshot(timeoutMs: number): Promise<Buffer> {
    return this.page.screenshot({ type: 'png', timeout: timeoutMs });
  }

  url(): string {
    return this.page.url();
  }

  crashed(): string | undefined {
    return this.crash;
  }

  /** Close the browser and drop the recording (the host is stopping). */
  async abort(): Promise<void> {
    if (this.closing) return;
    this.crash ??= 'the service stopped while the run was running';
    this.closing = true;
    await this.browser.close().catch(() => undefined);
    this.recorder?.discard();
    this.onClose();
  }

  async close(): Promise<Video | undefined> {
    if (this.closing) return undefined;
    this.closing = true;
    try {
      if (this.recorder && !this.crash) await this.recorder.stop();
      await this.browser.close().catch(() => undefined);
      if (!this.recorder) return undefined;
      return await this.recorder.encode(this.ffmpegPath);
    } finally {
      this.recorder?.discard();
      this.onClose();
    }
  }
}

/** Sessions still open, so a host that stops (the local server) can close their browsers. */
const open = new Set<PlaywrightSession>();

/**
 * Where every connection the browser makes to a host:port outside the allowed origins is sent: a proxy
 * that is not there (port 1 on loopback: nothing unprivileged can listen on it), so it fails with
 * `ERR_PROXY_CONNECTION_FAILED`, and there is no fallback to a direct connection.
 */
export const NO_PROXY = 'http://127.0.0.1:1';

/**
 * The session's confinement (issue 23), enforced by the browser in two layers:
 * - the connection layer: Chromium's proxy settings send every connection to the dead `NO_PROXY`
 *   except those to an allowed origin's host:port (`<-loopback>` makes loopback go through the proxy
 *   too, where Chromium would otherwise always connect directly): whatever makes it (a page, a redirect
 *   hop, a worker, a WebSocket), a connection elsewhere never opens;
 * - the request layer: the browser-wide Fetch domain (CDP, on the browser target, so every page, popup,
 *   frame and worker of the browser, redirect hops included) fails each request whose URL is not of an
 *   allowed origin, `file:` and `view-source:` included, and each redirect (at the response stage) whose
 *   Location is not one, whatever its scheme, and remembers the first refusal for the run's
 *   message; `data:` is let through as a subresource (inline images) and refused as a document.
 * WebSockets are not requests the Fetch domain sees: the connection layer refuses them, and the page's
 * `websocket` event names them.
 */
class OriginGuard {
  readonly origins: ReadonlySet<string>;
  private refusal: string | undefined;

  constructor(origins: string[]) {
    this.origins = new Set(origins);
  }

  /** Chromium's proxy bypass list: every allowed host:port, and loopback proxied like the rest. */
  bypass(): string {
    return ['<-loopback>', ...[...this.origins].map(hostPort)].join(',');
  }

  refuse(message: string): void {
    this.refusal ??= message;
  }

  take(): string | undefined {
    const r = this.refusal;
    this.refusal = undefined;
    return r;
  }

  async attach(browser: PwBrowser): Promise<void> {
    const cdp = await browser.newBrowserCDPSession();
    cdp.on('Fetch.requestPaused', (event) => {
      const type = event.resourceType;
      let url = event.request.url;
      let allowed = url.startsWith('data:') ? type !== 'Document' : originAllowed(url, this.origins);
      // At the response stage: a redirect is judged by where it points, before the browser follows it
      // (Chromium would refuse a redirect to file:, data: or chrome: itself, but without saying so).
      const status = event.responseStatusCode;
      if (allowed && status !== undefined && status >= 300 && status < 400) {
        const location = event.responseHeaders?.find((h) => h.name.toLowerCase() === 'location')?.value;
        if (location) {
          url = resolveLocation(location, url);
          allowed = originAllowed(url, this.origins);
        }
      }
      if (allowed) {
        cdp.send('Fetch.continueRequest', { requestId: event.requestId }).catch(() => undefined);
        return;
      }
      this.refuse(type === 'Document' ? navigationRefused(url) : requestRefused(url, requestKind(type)));
      cdp
        .send('Fetch.failRequest', { requestId: event.requestId, errorReason: 'BlockedByClient' })
        .catch(() => undefined);
    });
    await cdp.send('Fetch.enable', {
      patterns: [
        { urlPattern: '*', requestStage: 'Request' },
        { urlPattern: '*', requestStage: 'Response' },
      ],
    });
  }

  /** Name a WebSocket a page of the context opens outside the origins (the proxy refuses its connection). */
  watch(context: BrowserContext): void {
    const onPage = (page: Page) =>
      page.on('websocket', (ws) => {
        if (!originAllowed(ws.url(), this.origins)) this.refuse(requestRefused(ws.url(), 'websocket'));
      });
    context.on('page', onPage);
    for (const page of context.pages()) onPage(page);
  }
}

/** A Location header against the URL that answered it (an unparsable one stays as it is: refused). */
function resolveLocation(location: string, base: string): string {
  try {
    return new URL(location, base).href;
  } catch {
    return location;
  }
}

/** What a request is, in a message: CDP's resource type (`XHR`, `Fetch` → fetch; `Image` → image). */
const requestKind = (type: string) => (type === 'XHR' || type === 'Fetch' ? 'fetch' : type.toLowerCase());

/** Launch a browser per the spec and open one page in it, confined to `opts.allowedOrigins`. */
export async function openPlaywrightSession(spec: LaunchSpec, opts: SessionOptions): Promise<BrowserSession> {
  const { chromium } = await import('playwright-core');
  const guard = new OriginGuard(opts.allowedOrigins);
  const browser = await chromium.launch({
    executablePath: spec.executablePath,
    // Playwright gives every launch a fresh, temporary user-data dir (and removes it on close).
    args: spec.args,
    proxy: { server: NO_PROXY, bypass: guard.bypass() },
    headless: true,
    timeout: LAUNCH_TIMEOUT_MS,
    // The host process (the local server, a Lambda) keeps its own signal handling.
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
    ...(spec.env ? { env: { ...process.env, ...spec.env } } : {}),
  });
  try {
    await guard.attach(browser);
    const context = await browser.newContext({
      viewport: opts.viewport,
      ignoreHTTPSErrors: true,
      // A service worker could answer for the page out of the interception's sight; nothing is saved.
      serviceWorkers: 'block',
      acceptDownloads: false,
    });
    guard.watch(context);
    const page = await context.newPage();
    let recorder: ScreencastRecorder | undefined;
    if (opts.video) {
      recorder = new ScreencastRecorder(await context.newCDPSession(page), spec.tmpDir ?? tmpdir());
      await recorder.start(opts.viewport);
    }
    const session: PlaywrightSession = new PlaywrightSession(
      browser,
      page,
      recorder,
      spec.ffmpegPath,
      guard,
      () => open.delete(session),
    );
    open.add(session);
    return session;
  } catch (err) {
    await browser.close().catch(() => undefined);
    throw err;
  }
}

/** Close every open session's browser (their videos are dropped). */
export async function closeAllSessions(): Promise<void> {
  await Promise.all([...open].map((s) => s.abort()));
}
