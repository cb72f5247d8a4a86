import { describe, expect, test } from '@jest/globals';
import { factoryRoute } from './provision.js';

/*
 * Where a run's Environment Factory calls go against a preview behind the front door. Locally the factory
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
