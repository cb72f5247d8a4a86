import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { callFactory } from '../../scenarios/factory.js';
import { factoryRoute } from './provision.js';

/*
 * Issue 29: where a run's Environment Factory calls go against a protected preview. Locally the factory
 * app's own port (the runtime's service address, behind no front door); in AWS its public URL with the
 * access cookie of that origin, and never another origin's.
 */

const cookie = (url: string, value: string) => ({ url, cookie: { name: 'preview_access', value } });
const factory = { app: 'factory', path: '/_preview/factory' };

describe('factoryRoute', () => {
  test("the factory app's service address when the runtime has one: no cookie sent", () => {
    expect(
      factoryRoute(
        {
          urls: {
            factory: 'http://factory--acme-shop-7-1a2b.localhost:4100',
            web: 'http://web.localhost:4101',
          },
          serviceUrls: { factory: 'http://127.0.0.1:5100', web: 'http://127.0.0.1:5101' },
          factory,
        },
        [cookie('http://factory--acme-shop-7-1a2b.localhost:4100', 'v1.1.a')],
      ),
    ).toEqual({ url: 'http://127.0.0.1:5100/_preview/factory', headers: {} });
  });

  test('else the public URL with the access cookie of that origin only', () => {
    const route = factoryRoute(
      {
        urls: {
          factory: 'https://factory.pr-7.previews.example.com',
          web: 'https://web.pr-7.previews.example.com',
        },
        factory,
      },
      [
        cookie('https://web.pr-7.previews.example.com', 'v1.1.web'),
        cookie('https://factory.pr-7.previews.example.com', 'v1.1.factory'),
      ],
    );
    expect(route).toEqual({
      url: 'https://factory.pr-7.previews.example.com/_preview/factory',
      headers: { cookie: 'preview_access=v1.1.factory' },
    });
  });

  test('a public preview: no cookie; an unknown factory app: the error names the apps', () => {
    expect(factoryRoute({ urls: { factory: 'https://f.example.com' }, factory })).toEqual({
      url: 'https://f.example.com/_preview/factory',
      headers: {},
    });
    const service = factoryRoute({
      urls: { web: 'https://w.example.com' },
      serviceUrls: { web: 'x' },
      factory,
    });
    expect(service).toEqual({
      error: 'the factory app "factory" is not an app of the run\'s environment (its apps: web)',
    });
  });
});

describe('callFactory with extra headers', () => {
  let server: Server;
  let url: string;
  const seen: IncomingHttpHeaders[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      req.on('end', () => res.writeHead(401, { 'content-type': 'text/plain' }).end('protected'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/f`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test('sends the cookie; the signature and content type stay its own; the error never quotes the cookie', async () => {
    const err = await callFactory(url, 's', { action: 'up' }, (t) => t, {
      headers: { cookie: 'preview_access=v1.9.secret-token', 'x-signature': 'forged' },
    }).catch((e: Error) => e);
    expect(seen[0]!.cookie).toBe('preview_access=v1.9.secret-token');
    expect(seen[0]!['x-signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(seen[0]!['content-type']).toBe('application/json');
    expect(String(err)).toContain('refused up');
    expect(String(err)).not.toContain('secret-token');
  });
});
