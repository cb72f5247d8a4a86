import { createServer, type IncomingHttpHeaders, request, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { FrontDoors } from '../../../functions/ports/runtime/local/front-door.js';
import type { FrontDoorSettings } from '../../../functions/ports/runtime/port.js';
import { accessLink, signAccessToken } from '../../../functions/shared/access-token.js';
import { setLogSink } from '../../../functions/shared/log.js';
import { haveChromium, launchChromium } from '../../support/chromium.js';

/*
 * A WebSocket through the local front door, in real chromium. The upgrade is admitted like a
 * request (the access cookie checked, refused 401 without it), forwarded to the app without the access
 * cookie, and the app's answers come back; an open connection keeps the preview awake, and a connection to
 * a sleeping preview wakes it first. The app is a loopback server of `ws` (the WebSocket library the
 * Kubernetes client brings), so the protocol is the library's, not ours.
 */

interface WsLike {
  on(event: 'message', fn: (data: Buffer) => void): void;
  send(data: string): void;
}
interface WssLike {
  on(event: 'connection', fn: (ws: WsLike, req: { headers: IncomingHttpHeaders }) => void): void;
  close(): void;
}
const { WebSocketServer } = createRequire(import.meta.url)('ws') as {
  WebSocketServer: new (opts: { server: Server }) => WssLike;
};

const KEY = 'k'.repeat(64);
const APP_ID = 'app-ws';
const target = { orgId: 'org-ws', envKey: 'acme/live#9', repoFullName: 'acme/live', prNumber: 9 };
const ENV = 'env-ws';
const chromiumTest = haveChromium() ? test : test.skip;

let app: Server;
let wss: WssLike;
let doors: FrontDoors;
let url: string;
let browser: Browser | undefined;
let asleep = false;
const calls: string[] = [];
/** The Cookie header of each upgrade the app received. */
const upgrades: (string | undefined)[] = [];

async function openDoor(settings: Partial<FrontDoorSettings> = {}) {
  const opened = await doors.open(
    ENV,
    target,
    { access: 'protected', sleepAfterMs: 0, applicationId: APP_ID, ...settings },
    'web',
    (app.address() as AddressInfo).port,
  );
  url = opened.url;
}

beforeAll(async () => {
  setLogSink(() => undefined);
  app = createServer((_req, res) => {
    res
      .writeHead(200, { 'content-type': 'text/html' })
      .end('<!doctype html><title>live</title><h1>live</h1>');
  });
  wss = new WebSocketServer({ server: app });
  wss.on('connection', (ws, req) => {
    upgrades.push(req.headers.cookie);
    ws.on('message', (data) => ws.send(`echo:${data.toString()}`));
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  doors = new FrontDoors({
    accessKey: async (id) => (id === APP_ID ? KEY : undefined),
    asleep: () => asleep,
    sleep: async () => {
      calls.push('sleep');
      asleep = true;
    },
    wake: async () => {
      calls.push('wake');
      await new Promise((r) => setTimeout(r, 200));
      asleep = false;
    },
  });
  await openDoor();
  if (!haveChromium()) return;
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await doors?.closeAll();
  wss?.close();
  await new Promise((r) => app?.close(r));
});

/** An upgrade request to the door (as a browser sends it, to 127.0.0.1 with the door's Host): its status. */
function upgradeStatus(cookie?: string): Promise<number> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: u.port,
      path: '/live',
      headers: {
        host: u.host,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': Buffer.from('0123456789abcdef').toString('base64'),
        ...(cookie ? { cookie } : {}),
      },
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

/** In a page of the door's origin let in by the link: open a WebSocket, send `ping`, resolve its answer. */
const ECHO = `new Promise((resolve) => {
  const ws = new WebSocket('ws://' + location.host + '/live');
  ws.onopen = () => ws.send('ping');
  ws.onmessage = (e) => { window.live = ws; resolve(String(e.data)); };
  ws.onerror = () => resolve('error');
})`;

describe('a WebSocket through the local front door', () => {
  test('without the access cookie, or with another environment’s, the upgrade is refused 401', async () => {
    expect(url).toMatch(/^http:\/\/web--acme-live-9-[0-9a-f]{4}\.localhost:\d+$/);
    expect(await upgradeStatus()).toBe(401);
    const other = signAccessToken(KEY, { ...target, envKey: 'acme/live#10' }, Date.now());
    expect(await upgradeStatus(`preview_access=${other}`)).toBe(401);
    expect(await upgradeStatus(`preview_access=${signAccessToken(KEY, target, Date.now())}`)).toBe(101);
  });

  chromiumTest(
    'a browser let in by the link talks to the app over a WebSocket; the app never sees the access cookie',
    async () => {
      const context = await browser!.newContext();
      try {
        const page = await context.newPage();
        await page.goto(accessLink(url, signAccessToken(KEY, target, Date.now())));
        expect(await page.textContent('h1')).toBe('live');
        await context.addCookies([{ name: 'theirs', value: '1', url }]);
        upgrades.length = 0;
        expect(await page.evaluate<string>(ECHO)).toBe('echo:ping');
        expect(upgrades).toHaveLength(1);
        expect(upgrades[0]).toBe('theirs=1');
      } finally {
        await context.close();
      }
    },
    30_000,
  );

  chromiumTest(
    'an open WebSocket keeps the preview awake; once closed it sleeps, and the next one wakes it first',
    async () => {
      await openDoor({ sleepAfterMs: 400 });
      const context = await browser!.newContext();
      try {
        const page = await context.newPage();
        await page.goto(accessLink(url, signAccessToken(KEY, target, Date.now())));
        calls.length = 0;
        expect(await page.evaluate<string>(ECHO)).toBe('echo:ping');
        // Well past the idle time with the connection open: no sleep.
        await new Promise((r) => setTimeout(r, 1_500));
        expect(calls).toEqual([]);
        await page.evaluate('window.live.close()');
        const deadline = Date.now() + 5_000;
        while (!asleep && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        expect(calls).toEqual(['sleep']);
        // A new connection to the sleeping preview wakes it, then reaches the app.
        expect(await page.evaluate<string>(ECHO)).toBe('echo:ping');
        expect(calls).toEqual(['sleep', 'wake']);
        expect(asleep).toBe(false);
      } finally {
        await context.close();
        await openDoor({ sleepAfterMs: 0 });
      }
    },
    30_000,
  );
});
