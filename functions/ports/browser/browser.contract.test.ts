import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { LambdaChromium } from './lambda-chromium.js';
import {
  describeMissingBrowser,
  findExecutable,
  LOCAL_CHROMIUM_FLAGS,
  LocalChromium,
} from './local-chromium.js';
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
      const session = await browser.open({ viewport: { width: 640, height: 480 }, video: true });
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
      } finally {
        const video = await session.close();
        expect(video).toMatchObject({ contentType: 'video/mp4', extension: 'mp4' });
        expect(video!.durationMs).toBeGreaterThan(0);
        const file = join(dir, 'v.mp4');
        writeFileSync(file, video!.body);
        const duration = Number(
          execFileSync(
            'ffprobe',
            ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file],
            {
              encoding: 'utf8',
            },
          ).trim(),
        );
        expect(duration).toBeGreaterThan(0);
        expect(Math.abs(duration * 1000 - video!.durationMs)).toBeLessThan(1_000);
      }
    }, 60_000);

    test('a navigation to a port nobody listens on rejects with the browser error', async () => {
      const closed = createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
      const port = (closed.address() as AddressInfo).port;
      await new Promise((r) => closed.close(r));
      const session = await make().open({ viewport: { width: 320, height: 240 }, video: false });
      try {
        await expect(session.goto(`http://127.0.0.1:${port}/`, 5_000)).rejects.toThrow(
          /net::ERR_CONNECTION_REFUSED/,
        );
      } finally {
        expect(await session.close()).toBeUndefined();
      }
    }, 30_000);
  });
}

browserContract('LocalChromium', () => new LocalChromium());
// The Lambda adapter's Chromium (@sparticuz/chromium, built for Amazon Linux x86_64) runs here too.
if (process.platform === 'linux' && process.arch === 'x64')
  browserContract('LambdaChromium', () => new LambdaChromium(findExecutable('ffmpeg')));

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

  test('what is missing is said with what to install', () => {
    expect(describeMissingBrowser('/nope/chromium', 'no-such-ffmpeg')).toBe(
      'test runs need chromium (/nope/chromium) and ffmpeg (no-such-ffmpeg), which are not installed: install ' +
        'with `apt-get install -y chromium ffmpeg` (Debian/Ubuntu), or point PREVIEW_BROWSER_PATH / ' +
        'PREVIEW_FFMPEG_PATH at them',
    );
    expect(describeMissingBrowser('/usr/bin/chromium', 'no-such-ffmpeg')).toMatch(
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
    await expect(browser.open({ viewport: { width: 100, height: 100 }, video: false })).rejects.toThrow(
      'the service is stopping',
    );
  });
});
