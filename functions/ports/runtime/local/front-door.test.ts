import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { setLogSink } from '../../../shared/log.js';
import { FrontDoors } from './front-door.js';

/*
 * The door's forwarding (http-proxy-3) when a visitor goes away in the middle: a response that never ends
 * (server-sent events) and a WebSocket. The connection to the app must be closed and the request no
 * longer counted in flight, so the idle preview falls asleep. The app is a loopback server; the WebSocket
 * on both sides is the `ws` library's (the Kubernetes client brings it).
 */

interface WsLike {
  on(event: 'open' | 'close', fn: () => void): void;
  on(event: 'message', fn: (data: Buffer) => void): void;
  send(data: string): void;
  terminate(): void;
}
const ws = createRequire(import.meta.url)('ws') as {
  WebSocket: new (url: string) => WsLike;
  WebSocketServer: new (opts: {
    server: Server;
  }) => {
    on(event: 'connection', fn: (socket: WsLike, req: IncomingMessage) => void): void;
    close(): void;
  };
};

const SLEEP_AFTER_MS = 300;
const ENV = 'env-live';
const target = { orgId: 'org-live', envKey: 'acme/live#3', repoFullName: 'acme/live', prNumber: 3 };

let app: Server;
let wss: InstanceType<typeof ws.WebSocketServer>;
/** The app's side of each server-sent events stream's connection, open or closed. */
const appStreams: Socket[] = [];
const appWebSockets: { closed: boolean }[] = [];
let doors: FrontDoors;
let asleep = false;
let sleeps = 0;
let url: string;

const until = async (what: () => boolean, ms: number): Promise<boolean> => {
  const end = Date.now() + ms;
  while (!what() && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
  return what();
};

beforeAll(async () => {
  setLogSink(() => undefined);
  app = createServer((req, res) => {
    if (req.url === '/events') {
      // Server-sent events: a first event, then nothing, and never an end.
      appStreams.push(req.socket);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      res.write('data: hello\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
  wss = new ws.WebSocketServer({ server: app });
  wss.on('connection', (socket) => {
    const state = { closed: false };
    appWebSockets.push(state);
    socket.on('close', () => {
      state.closed = true;
    });
    socket.on('message', (data) => socket.send(`echo:${data.toString()}`));
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  doors = new FrontDoors({
    accessKey: async () => undefined,
    asleep: () => asleep,
    sleep: async () => {
      sleeps++;
      asleep = true;
    },
    wake: async () => {
      asleep = false;
    },
  });
  const opened = await doors.open(
    ENV,
    target,
    { access: 'public', sleepAfterMs: SLEEP_AFTER_MS },
    'web',
    (app.address() as AddressInfo).port,
  );
  url = opened.url;
});
afterEach(() => {
  asleep = false;
  sleeps = 0;
  doors.touch(ENV);
});
afterAll(async () => {
  await doors.closeAll();
  wss.close();
  app.closeAllConnections();
  await new Promise((r) => app.close(r));
});

describe('the local front door, when the visitor goes away mid-response', () => {
  test('a plain request is forwarded and answered', async () => {
    const body = await new Promise<string>((resolve, reject) => {
      const req = request(`${url}/`, (res) => {
        let text = '';
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => resolve(`${res.statusCode} ${text}`));
      });
      req.on('error', reject).end();
    });
    expect(body).toBe('200 ok');
  });

  test('server-sent events: open, the preview stays awake; the visitor leaves: the app connection closes, it sleeps', async () => {
    const before = appStreams.length;
    const { req, first } = await new Promise<{ req: ReturnType<typeof request>; first: string }>(
      (resolve, reject) => {
        const r = request(`${url}/events`, { headers: { accept: 'text/event-stream' } }, (res) => {
          res.once('data', (chunk: Buffer) => resolve({ req: r, first: chunk.toString() }));
        });
        r.on('error', reject).end();
      },
    );
    expect(first).toBe('data: hello\n\n');
    const appSide = appStreams.slice(before);
    expect(appSide).toHaveLength(1);
    // Well past the idle time with the stream open: in flight, so no sleep.
    await new Promise((r) => setTimeout(r, SLEEP_AFTER_MS * 3));
    expect(sleeps).toBe(0);
    expect(appSide[0]!.destroyed).toBe(false);

    req.destroy();
    expect(await until(() => appSide[0]!.destroyed, 5_000)).toBe(true);
    expect(await until(() => sleeps === 1, 5_000)).toBe(true);
  }, 20_000);

  test('a WebSocket: open, the preview stays awake; the visitor vanishes: the app’s socket closes, it sleeps', async () => {
    const before = appWebSockets.length;
    const client = new ws.WebSocket(`${url.replace('http:', 'ws:')}/live`);
    const echo = await new Promise<string>((resolve, reject) => {
      client.on('open', () => client.send('ping'));
      client.on('message', (data) => resolve(data.toString()));
      client.on('close', () => reject(new Error('closed before an answer')));
    });
    expect(echo).toBe('echo:ping');
    const appSide = appWebSockets.slice(before);
    expect(appSide).toHaveLength(1);
    await new Promise((r) => setTimeout(r, SLEEP_AFTER_MS * 3));
    expect(sleeps).toBe(0);
    expect(appSide[0]!.closed).toBe(false);

    // Gone without a closing handshake (a tab killed, a network lost): the socket is destroyed.
    client.terminate();
    expect(await until(() => appSide[0]!.closed, 5_000)).toBe(true);
    expect(await until(() => sleeps === 1, 5_000)).toBe(true);
  }, 20_000);
});
