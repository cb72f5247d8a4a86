import { describe, expect, test } from '@jest/globals';
import { postgresImage, postgresVersionOf } from './objects.js';

describe('the Postgres version of a Cluster', () => {
  test('is the major of its image’s tag, as the service writes it and as an operator may pin it', () => {
    expect(postgresVersionOf({ spec: { imageName: postgresImage('16') } })).toBe('16');
    expect(postgresVersionOf({ spec: { imageName: 'ghcr.io/cloudnative-pg/postgresql:17.2' } })).toBe('17');
    expect(postgresVersionOf({ spec: { imageName: 'ghcr.io/cloudnative-pg/postgresql:15-bookworm' } })).toBe(
      '15',
    );
    expect(postgresVersionOf({ spec: { imageName: 'registry.local:5000/postgresql:14' } })).toBe('14');
  });

  test('is unknown without a tag that names it (a digest, none, no image): nothing to compare', () => {
    expect(postgresVersionOf({ spec: { imageName: 'registry.local:5000/postgresql' } })).toBeUndefined();
    expect(
      postgresVersionOf({ spec: { imageName: 'ghcr.io/cloudnative-pg/postgresql:latest' } }),
    ).toBeUndefined();
    const digest = `ghcr.io/cloudnative-pg/postgresql@sha256:${'0123456789abcdef'.repeat(4)}`;
    expect(postgresVersionOf({ spec: { imageName: digest } })).toBeUndefined();
    expect(postgresVersionOf({ spec: {} })).toBeUndefined();
    expect(postgresVersionOf({})).toBeUndefined();
  });
});
