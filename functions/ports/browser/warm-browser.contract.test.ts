import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { LambdaChromium } from './lambda-chromium.js';
import { findExecutable, LocalChromium } from './local-chromium.js';
import type { Browser, BrowserSession } from './port.js';
import { readZip } from './trace-zip.js';
import { RunQueue } from './warm-browser.js';

/*
 * Warm browsers, for real against both adapters: a browser stays warm between sessions, each session is a
 * fresh context (no cookie of another, concurrent or earlier), a killed browser fails only the session in
 * flight and the next one gets a new browser; a session records a masked trace holding its steps' actions,
 * and reports the page's console errors and failed requests.
 */

let server: Server;
let base: string;
const cookiesSeen: string[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/set') {
      cookiesSeen.push(req.headers.cookie ?? '');
      res.writeHead(200, {
        'content-type': 'text/html',
        'set-cookie': `who=${url.searchParams.get('who')}; Path=/`,
      });
      return res.end('<p>set</p>');
    }
    if (url.pathname === '/echo') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end(`<p id="c">cookie:${req.headers.cookie ?? ''}</p>`);
    }
    if (url.pathname === '/api') {
      res.writeHead(500, { 'content-type': 'application/json' });
      return res.end('{"error":"boom"}');
    }
    if (url.pathname === '/noisy') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end(
        '<input id="pw"><button id="b" onclick="fetch(\'/api\')">go</button>' +
          '<script>console.error("planted console error"); console.warn("a warning"); console.log("not kept")</script>',
      );
    }
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<h1>Hello</h1>');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
});

/** The pids of the browsers this process launched (Playwright's pipe-driven chromium children). */
function browserPids(): number[] {
  let out = '';
  try {
    out = execFileSync('pgrep', ['-P', String(process.pid)], { encoding: 'utf8' });
  } catch {
    return [];
  }
  return out
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((pid) => {
      try {
        return execFileSync('cat', [`/proc/${pid}/cmdline`], { encoding: 'utf8' }).includes(
          '--remote-debugging-pipe',
        );
      } catch {
        return false;
      }
    });
}

const open = (browser: Browser, extra: { trace?: boolean } = {}) =>
  browser.open({ viewport: { width: 640, height: 480 }, video: false, allowedOrigins: [base], ...extra });

function warmContract(name: string, make: () => Browser & { stop(): Promise<void> }) {
  describe(`${name}: a warm browser, a fresh context per session`, () => {
    const browser = make();
    afterAll(async () => {
      await browser.stop();
    });

    test('a second session reuses the browser, and sees no cookie of the first', async () => {
      const first = await open(browser);
      await first.goto(`${base}/set?who=first`, 10_000);
      await first.goto(`${base}/echo`, 10_000);
      expect(await first.waitForText('cookie:who=first', '#c', 2_000)).toBe(true);
      await first.close();
      const pids = browserPids();
      const started = Date.now();
      const second = await open(browser);
      const openMs = Date.now() - started;
      try {
        await second.goto(`${base}/echo`, 10_000);
        expect(await second.waitForText('cookie:', '#c', 2_000)).toBe(true);
        expect(await second.waitForText('who=first', '#c', 300)).toBe(false);
      } finally {
        await second.close();
      }
      // The same browser process: no launch.
      expect(browserPids()).toEqual(pids);
      expect(openMs).toBeLessThan(2_000);
    }, 60_000);

    test('a killed browser fails the session in flight only; the next session gets a new browser', async () => {
      const doomed = await open(browser);
      await doomed.goto(`${base}/`, 10_000);
      const before = browserPids();
      expect(before.length).toBeGreaterThan(0);
      for (const pid of before) process.kill(pid, 'SIGKILL');
      await expect(doomed.goto(`${base}/echo`, 5_000)).rejects.toThrow();
      expect(doomed.crashed()).toMatch(/the browser exited unexpectedly/);
      await doomed.close();
      const next = await open(browser);
      try {
        await next.goto(`${base}/`, 10_000);
        expect(await next.waitForText('Hello', undefined, 2_000)).toBe(true);
        expect(next.crashed()).toBeUndefined();
      } finally {
        await next.close();
      }
      expect(browserPids().some((p) => !before.includes(p))).toBe(true);
    }, 60_000);

    test("a session's trace holds each step's actions, masked; the page's console errors and failed requests are reported", async () => {
      const session: BrowserSession = await open(browser, { trace: true });
      let events: ReturnType<NonNullable<BrowserSession['takeEvents']>>;
      try {
        await session.beginStep!('step 1: navigate');
        await session.goto(`${base}/noisy`, 10_000);
        await session.beginStep!('step 2: input-text #pw');
        await session.fill('#pw', 'hunter2-bundle-secret', 5_000);
        await session.beginStep!('step 3: click #b');
        await session.click('#b', 5_000);
        await new Promise((r) => setTimeout(r, 500));
        events = session.takeEvents!();
      } catch (err) {
        await session.close();
        throw err;
      }
      const { trace } = await session.close({
        mask: (t) => t.split('hunter2-bundle-secret').join('[secret]'),
      });
      expect(events.events).toEqual([
        { kind: 'console', level: 'error', text: 'planted console error' },
        { kind: 'console', level: 'warning', text: 'a warning' },
        { kind: 'request', level: '500', text: `GET ${base}/api → 500` },
      ]);
      expect(trace).toBeInstanceOf(Buffer);
      const entries = await readZip(trace!);
      const text = entries.map((e) => e.body.toString('latin1')).join('\n');
      expect(text).not.toContain('hunter2-bundle-secret');
      expect(text).toContain('[secret]');
      const traceFile = entries.find((e) => e.name === 'trace.trace')!.body.toString('utf8');
      for (const title of ['step 1: navigate', 'step 2: input-text #pw', 'step 3: click #b'])
        expect(traceFile).toContain(`"title":"${title}"`);
      // The actions themselves, under their steps.
      expect(traceFile).toMatch(/"method":"goto"/);
      expect(traceFile).toMatch(/"method":"fill"/);
      expect(traceFile).toMatch(/"method":"click"/);
    }, 60_000);
  });
}

warmContract('LocalChromium', () => new LocalChromium());
if (process.platform === 'linux' && process.arch === 'x64')
  warmContract('LambdaChromium', () => new LambdaChromium(findExecutable('ffmpeg')));

describe('LocalChromium runs sessions in parallel, isolated', () => {
  test('two concurrent sessions see no cookie of each other', async () => {
    const browser = new LocalChromium({ concurrency: 2 });
    try {
      const [a, b] = await Promise.all([open(browser), open(browser)]);
      try {
        await Promise.all([a.goto(`${base}/set?who=a`, 10_000), b.goto(`${base}/set?who=b`, 10_000)]);
        await Promise.all([a.goto(`${base}/echo`, 10_000), b.goto(`${base}/echo`, 10_000)]);
        expect(await a.waitForText('cookie:who=a', '#c', 2_000)).toBe(true);
        expect(await b.waitForText('cookie:who=b', '#c', 2_000)).toBe(true);
        expect(await a.waitForText('who=b', '#c', 200)).toBe(false);
        expect(await b.waitForText('who=a', '#c', 200)).toBe(false);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    } finally {
      await browser.stop();
    }
  }, 60_000);
});

describe('RunQueue', () => {
  test('up to its size at once; the others in the order they asked; stop refuses the waiting', async () => {
    const queue = new RunQueue(2);
    const order: string[] = [];
    const t1 = await queue.turn();
    const t2 = await queue.turn();
    const w3 = queue.turn().then((t) => {
      order.push('3');
      return t;
    });
    const w4 = queue.turn().then((t) => {
      order.push('4');
      return t;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual([]);
    expect(queue.queued).toBe(2);
    t2.release();
    t2.release(); // once only
    const t3 = await w3;
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual(['3']);
    t1.release();
    const t4 = await w4;
    expect(order).toEqual(['3', '4']);
    const w5 = queue.turn();
    queue.stop();
    await expect(w5).rejects.toThrow('the service is stopping');
    await expect(queue.turn()).rejects.toThrow('the service is stopping');
    t3.release();
    t4.release();
  });
});
