import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { probeVideo } from '../../../test/support/video.js';
import { LambdaChromium, lambdaChromiumFlags } from './lambda-chromium.js';
import { findExecutable, LOCAL_CHROMIUM_FLAGS, LocalChromium } from './local-chromium.js';
import { describeMissingTools } from './local-tools.js';
import type { Browser } from './port.js';

/*
 * The Browser contract, for real against both adapters, offline, on a page this test serves: Debian's
 * chromium driven by playwright-core (local), and @sparticuz/chromium driven by the same Playwright session
 * (Lambda; its binary is unpacked into /tmp on first use, as in a Lambda).
 */

let server: Server;
let base: string;
const dir = mkdtempSync(join(tmpdir(), 'browser-'));
beforeAll(async () => {
  server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    if (req.url === '/next') return res.end('<h1 id="h">Next page</h1>');
    res.end(
      '<h1>Form</h1><input id="name"><button id="go" onclick="location.href=\'/next\'">Go</button>' +
        '<script>setTimeout(() => document.body.insertAdjacentHTML("beforeend", "<p id=later>Later  text</p>"), 300)</script>',
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

function browserContract(name: string, make: () => Browser) {
  describe(`${name} honours the Browser contract`, () => {
    test('drives a page: goto, fill, waitForText, waitVisible, click, press, screenshot, url; records a video', async () => {
      const browser = make();
      expect(browser.missing()).toBeUndefined();
      const session = await browser.open({
        viewport: { width: 640, height: 480 },
        video: true,
        allowedOrigins: [base],
      });
      const opened = Date.now();
      let closing = 0;
      try {
        await session.goto(`${base}/`, 10_000);
        expect(session.url()).toBe(`${base}/`);
        await session.fill('#name', 'Ada', 5_000);
        await session.press('End', '#name', 5_000);
        // Text appears later; whitespace is normalized.
        expect(await session.waitForText('Later text', undefined, 5_000)).toBe(true);
        expect(await session.waitForText('Later', '#later', 5_000)).toBe(true);
        expect(await session.waitForText('Never', undefined, 500)).toBe(false);
        await session.waitVisible('#later', 5_000);
        await expect(session.waitVisible('#nothing', 300)).rejects.toMatchObject({ name: 'TimeoutError' });
        await expect(session.click('#nothing', 300)).rejects.toThrow(/Timeout 300ms exceeded/);
        const png = await session.screenshot(5_000);
        expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
        expect(png.readUInt32BE(16)).toBe(640);
        expect(png.readUInt32BE(20)).toBe(480);
        await session.click('#go', 5_000);
        expect(session.url()).toBe(`${base}/next`);
        expect(session.crashed()).toBeUndefined();
        // Nothing changes on the page for a while: the video still lasts until the session closes.
        await new Promise((r) => setTimeout(r, 1_500));
      } finally {
        closing = Date.now();
        const { video } = await session.close();
        expect(video).toMatchObject({ contentType: 'video/mp4', extension: 'mp4' });
        expect(video!.durationMs).toBeGreaterThan(0);
        const file = join(dir, 'v.mp4');
        writeFileSync(file, video!.body);
        const duration = probeVideo(file).durationSeconds;
        expect(duration).toBeGreaterThan(0);
        expect(Math.abs(duration * 1000 - video!.durationMs)).toBeLessThan(1_000);
        // As long as the browser session: from its opening to its close, within a frame or so.
        expect(duration * 1000).toBeGreaterThanOrEqual(closing - opened - 200);
        expect(duration * 1000).toBeLessThan(closing - opened + 1_500);
      }
    }, 60_000);

    test('a navigation to a port nobody listens on rejects with the browser error', async () => {
      const closed = createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
      const port = (closed.address() as AddressInfo).port;
      await new Promise((r) => closed.close(r));
      const session = await make().open({
        viewport: { width: 320, height: 240 },
        video: false,
        allowedOrigins: [`http://127.0.0.1:${port}`],
      });
      try {
        await expect(session.goto(`http://127.0.0.1:${port}/`, 5_000)).rejects.toThrow(
          /net::ERR_CONNECTION_REFUSED/,
        );
      } finally {
        expect(await session.close()).toEqual({});
      }
    }, 30_000);
  });
}

/**
 * Run confinement: a session loads only its allowed origins. `base` is allowed; `other` (another port on
 * loopback: the control plane, another organization's app) answers a secret to anything that reaches it,
 * and 127.0.0.1:9001 stands for the Lambda Runtime API. Each probe is refused by the browser and named
 * by its origin; neither ever receives a request.
 */
function confinementContract(name: string, make: () => Browser) {
  describe(`${name} confines a session to its allowed origins`, () => {
    let app: Server;
    let other: Server;
    let runtimeApi: Server | undefined;
    let allowed: string;
    let otherUrl: string;
    const hits: string[] = [];
    const SECRET = 'other-origin-secret-5e1f';
    beforeAll(async () => {
      const listen = async (server: Server, port = 0) =>
        new Promise<string | undefined>((resolve) => {
          server.once('error', () => resolve(undefined));
          server.listen(port, '127.0.0.1', () =>
            resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
          );
        });
      other = createServer((req, res) => {
        hits.push(`other ${req.url}`);
        res.writeHead(200, { 'content-type': 'text/html', 'access-control-allow-origin': '*' });
        res.end(`<h1>${SECRET}</h1>`);
      });
      other.on('upgrade', (req, socket) => {
        hits.push(`other upgrade ${req.url}`);
        socket.destroy();
      });
      otherUrl = (await listen(other))!;
      runtimeApi = createServer((req, res) => {
        hits.push(`runtime ${req.url}`);
        res.end(SECRET);
      });
      if (!(await listen(runtimeApi, 9001))) runtimeApi = undefined;
      const ws = otherUrl.replace('http:', 'ws:');
      const pages: Record<string, string> = {
        '/': '<h1>Allowed</h1>',
        '/iframe': `<iframe src="${otherUrl}/iframe"></iframe>`,
        '/fetch': `<script>fetch("${otherUrl}/fetch").then((r) => r.text()).then((t) => { document.title = t; })</script>`,
        '/popup': `<script>window.open("${otherUrl}/popup")</script>`,
        '/ws': `<script>new WebSocket("${ws}/ws")</script>`,
        '/worker': `<script>new Worker(URL.createObjectURL(new Blob(['fetch("${otherUrl}/worker")'])))</script>`,
        '/link-local': '<img src="http://169.254.169.254/latest/meta-data/">',
        '/runtime-api': '<script>fetch("http://127.0.0.1:9001/2018-06-01/runtime/invocation/next")</script>',
        '/data-frame':
          '<iframe src="data:text/html,<h1>framed</h1>"></iframe><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">',
        '/data-top': '<script>location.href = "data:text/html,<h1>data document</h1>"</script>',
        '/location': `<script>setTimeout(() => { location.href = "${otherUrl}/moved" }, 50)</script>`,
      };
      app = createServer((req, res) => {
        const path = req.url ?? '/';
        if (path === '/redirect' || path === '/redirect-file') {
          res.writeHead(302, {
            location: path === '/redirect' ? `${otherUrl}/redirected` : 'file:///etc/hostname',
          });
          return res.end();
        }
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(pages[path] ?? '<h1>Not found</h1>');
      });
      allowed = (await listen(app))!;
    });
    afterAll(async () => {
      for (const s of [app, other, runtimeApi]) if (s) await new Promise((r) => s.close(r));
    });

    test('goto: only an allowed origin; anything else is refused before the browser sees it', async () => {
      const session = await make().open({
        viewport: { width: 320, height: 240 },
        video: false,
        allowedOrigins: [allowed],
      });
      try {
        const refused = async (url: string) =>
          session.goto(url, 5_000).then(
            () => 'loaded',
            (err: Error) => err.message,
          );
        expect(await refused(`${otherUrl}/x`)).toBe(`navigation to ${otherUrl} is not allowed for this run`);
        expect(await refused('file:///etc/hostname')).toBe(
          'navigation to file:// is not allowed for this run',
        );
        expect(await refused('chrome://version')).toBe(
          'navigation to chrome://version is not allowed for this run',
        );
        expect(await refused(`view-source:${allowed}/`)).toBe(
          'navigation to view-source: is not allowed for this run',
        );
        expect(await refused('data:text/html,<h1>x</h1>')).toBe(
          'navigation to data: is not allowed for this run',
        );
        expect(await refused('javascript:alert(1)')).toBe(
          'navigation to javascript: is not allowed for this run',
        );
        expect(await refused('http://169.254.169.254/latest/meta-data/')).toBe(
          'navigation to http://169.254.169.254 is not allowed for this run',
        );
        expect(await refused(`${allowed}/`)).toBe('loaded');
        expect(session.takeRefusals()).toEqual({ requests: [] });
      } finally {
        await session.close();
      }
    }, 60_000);

    test("a redirect, a frame, a popup, the page's fetch, a worker's, a WebSocket, link-local and the Runtime API are refused; only the page's own navigation is one", async () => {
      const session = await make().open({
        viewport: { width: 320, height: 240 },
        video: false,
        allowedOrigins: [allowed],
      });
      const seen: Record<string, string[]> = {};
      try {
        for (const path of [
          '/redirect',
          '/redirect-file',
          '/iframe',
          '/fetch',
          '/popup',
          '/ws',
          '/worker',
          '/link-local',
          '/runtime-api',
          '/location',
          '/data-frame',
          '/data-top',
        ]) {
          await session.goto(`${allowed}${path}`, 5_000).catch(() => undefined);
          // Let what the page started (a fetch, a worker, a popup) happen.
          await new Promise((r) => setTimeout(r, 600));
          const { navigation, requests } = session.takeRefusals();
          // The page's own navigation (`nav:`), then each other request refused: `origin kind ×count`.
          seen[path] = [
            ...(navigation ? [`nav: ${navigation}`] : []),
            ...requests.map((r) => `${r.origin} ${r.kind} ×${r.count}: ${r.message}`),
          ];
        }
        const ws = otherUrl.replace('http:', 'ws:');
        expect(seen).toEqual({
          '/redirect': [`nav: navigation to ${otherUrl} is not allowed for this run`],
          '/redirect-file': ['nav: navigation to file:// is not allowed for this run'],
          '/iframe': [`${otherUrl} frame ×1: the page's frame to ${otherUrl} is not allowed for this run`],
          '/fetch': [`${otherUrl} fetch ×1: the page's fetch to ${otherUrl} is not allowed for this run`],
          '/popup': [`${otherUrl} popup ×1: the page's popup to ${otherUrl} is not allowed for this run`],
          '/ws': [`${ws} websocket ×1: the page's websocket to ${ws} is not allowed for this run`],
          '/worker': [`${otherUrl} fetch ×1: the page's fetch to ${otherUrl} is not allowed for this run`],
          '/link-local': [
            "http://169.254.169.254 image ×1: the page's image to http://169.254.169.254 is not allowed for this run",
          ],
          '/runtime-api': [
            "http://127.0.0.1:9001 fetch ×1: the page's fetch to http://127.0.0.1:9001 is not allowed for this run",
          ],
          // A data: image or frame is the page's own markup, no load; Chromium refuses a top-level data: one.
          '/data-frame': [],
          '/data-top': [],
          // A script moving the page itself elsewhere: the page's own navigation.
          '/location': [`nav: navigation to ${otherUrl} is not allowed for this run`],
        });
        expect(session.url()).toBe(`${allowed}/data-top`);
        // Nothing reached the other origin or the Runtime API, not even a connection.
        expect(hits).toEqual([]);
      } finally {
        await session.close();
      }
    }, 90_000);
  });
}

// Browsers stay warm after their sessions: each adapter made here is stopped at the end.
const made: { stop(): Promise<void> }[] = [];
const track = <B extends { stop(): Promise<void> }>(b: B): B => {
  made.push(b);
  return b;
};
afterAll(async () => {
  await Promise.all(made.map((b) => b.stop()));
});

browserContract('LocalChromium', () => track(new LocalChromium()));
confinementContract('LocalChromium', () => track(new LocalChromium()));
// The Lambda adapter's Chromium (@sparticuz/chromium, built for Amazon Linux x86_64) runs here too.
if (process.platform === 'linux' && process.arch === 'x64') {
  // A machine without Debian's chromium and ffmpeg: the local adapter takes the packaged ones.
  const packagedOnly = () =>
    track(
      new LocalChromium({ systemChromium: '/nonexistent/chromium', systemFfmpeg: '/nonexistent/ffmpeg' }),
    );
  browserContract('LocalChromium (packaged Chromium and ffmpeg)', packagedOnly);
  confinementContract('LocalChromium (packaged Chromium and ffmpeg)', packagedOnly);
  browserContract('LambdaChromium', () => track(new LambdaChromium(findExecutable('ffmpeg'))));
  confinementContract('LambdaChromium', () => track(new LambdaChromium(findExecutable('ffmpeg'))));
}

describe('specifics', () => {
  test('LocalChromium launches offline: headless, no sandbox, no GPU, nothing that phones home', () => {
    expect(LOCAL_CHROMIUM_FLAGS).toEqual([
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ]);
  });

  test("LambdaChromium leaves out @sparticuz/chromium's flags that loosen what a page may do, and --single-process", () => {
    expect(
      lambdaChromiumFlags([
        '--single-process',
        '--disable-web-security',
        '--allow-running-insecure-content',
        '--no-zygote',
      ]),
    ).toEqual(['--no-zygote']);
  });

  test('what is missing is said with what to install', () => {
    expect(describeMissingTools({ browserPath: '/nope/chromium', ffmpegPath: 'no-such-ffmpeg' })).toBe(
      'test runs need chromium (/nope/chromium) and ffmpeg (no-such-ffmpeg), which are not installed: install ' +
        'with `apt-get install -y chromium ffmpeg` (Debian/Ubuntu), or point PREVIEW_BROWSER_PATH / ' +
        'PREVIEW_FFMPEG_PATH at them',
    );
    expect(describeMissingTools({ browserPath: process.execPath, ffmpegPath: 'no-such-ffmpeg' })).toMatch(
      /^test runs need ffmpeg \(no-such-ffmpeg\), which is not installed: install with `apt-get install -y ffmpeg`/,
    );
    expect(new LocalChromium({ browserPath: '/nope/chromium' }).missing()).toMatch(
      /apt-get install -y chromium`/,
    );
    expect(new LambdaChromium('/nope/ffmpeg').missing()).toBe(
      "test runs need ffmpeg at /nope/ffmpeg (the stack's ffmpeg layer, or PREVIEW_FFMPEG_PATH)",
    );
  });

  test('a stopped LocalChromium opens no more sessions', async () => {
    const browser = new LocalChromium();
    await browser.stop();
    await expect(
      browser.open({ viewport: { width: 100, height: 100 }, video: false, allowedOrigins: [] }),
    ).rejects.toThrow('the service is stopping');
  });
});
