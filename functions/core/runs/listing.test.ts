import { describe, expect, test } from '@jest/globals';
import { tables } from '../../manifest/tables.js';
import { ValidationError } from '../../shared/errors.js';
import { queryBoolean, queryInteger } from '../../shared/validation.js';
import {
  decodeRunCursor,
  encodeRunCursor,
  matchesFilters,
  planRunQuery,
  type RunFilters,
} from './listing.js';
import type { RunItem } from './store.js';

const run = (over: Partial<RunItem> = {}): RunItem => ({
  runId: 'run1',
  orgId: 'org1',
  testId: 'test1',
  name: 'Checkout works',
  status: 'pending',
  createdAt: '2026-01-02T03:04:05.000Z',
  folder: { id: 'f1', name: 'Folder one' },
  source: 'api',
  variables: { EMAIL: 'secret@example.com' },
  steps: [
    {
      id: 'step1',
      instruction: 'Type {{variable:EMAIL}}',
      interaction: 'input-text',
      url: 'https://shop.example/login',
      element: { html: '<input>', selector: '#email' },
      output: '',
      status: 'pending',
      imageKey: 'runs/run1/step1.png',
    },
  ],
  videoKey: 'runs/run1/video.mp4',
  createdKey: '2026-01-02T03:04:05.000Z#run1',
  testKey: 'org1#test1',
  folderKey: 'org1#f1',
  statusKey: 'org1#pending',
  ...over,
});

describe('planRunQuery', () => {
  test.each([
    [{ testId: 't', status: 'passed' }, 'listTestStatus', 'testStatusKey', 'o#t#passed'],
    [{ testId: 't' }, 'listTest', 'testKey', 'o#t'],
    [{ folderId: 'f', status: 'failed' }, 'listFolderStatus', 'folderStatusKey', 'o#f#failed'],
    [{ folderId: 'f' }, 'listFolder', 'folderKey', 'o#f'],
    [{ status: 'running' }, 'listStatus', 'statusKey', 'o#running'],
    [{}, 'listOrg', 'orgId', 'o'],
  ] as const)(
    '%j reads the one partition of exactly those runs: %s',
    (filters, indexName, keyName, keyValue) => {
      expect(planRunQuery('o', filters)).toEqual({ indexName, keyName, keyValue });
    },
  );
  test("test and folder read the test's partition, the folder checked on the runs fetched", () => {
    expect(planRunQuery('o', { testId: 't', folderId: 'f' })).toEqual({
      indexName: 'listTest',
      keyName: 'testKey',
      keyValue: 'o#t',
      folderId: 'f',
    });
    expect(planRunQuery('o', { testId: 't', folderId: 'f', status: 'pending' })).toEqual({
      indexName: 'listTestStatus',
      keyName: 'testStatusKey',
      keyValue: 'o#t#pending',
      folderId: 'f',
    });
  });
  test("flaky reads the sparse index of the org's flaky runs, the other filters applied by the Query", () => {
    expect(planRunQuery('o', { flaky: true })).toEqual({
      indexName: 'listFlaky',
      keyName: 'flakyKey',
      keyValue: 'o#flaky',
    });
    expect(planRunQuery('o', { flaky: true, testId: 't', folderId: 'f', status: 'passed' })).toEqual({
      indexName: 'listFlaky',
      keyName: 'flakyKey',
      keyValue: 'o#flaky',
      filter: { testId: 't', folderId: 'f', status: 'passed' },
    });
    // flaky: false is no filter at all.
    expect(planRunQuery('o', { flaky: false, testId: 't' })).toEqual({
      indexName: 'listTest',
      keyName: 'testKey',
      keyValue: 'o#t',
    });
    const listFlaky = tables.runs.indexes.find((ix) => ix.name === 'listFlaky');
    expect(listFlaky?.partitionKey.name).toBe('flakyKey');
    // The Query filters on what the index carries: test, folder and status are projected.
    expect(listFlaky?.projection).toEqual({
      include: expect.arrayContaining(['testId', 'folder', 'status']),
    });
  });
  test('every index the planner names is in the manifest, keyed on the attribute it queries', () => {
    const indexes = new Map<string, string>(tables.runs.indexes.map((ix) => [ix.name, ix.partitionKey.name]));
    for (const f of [
      { testId: 't', status: 'passed' },
      { testId: 't' },
      { folderId: 'f', status: 'failed' },
      { folderId: 'f' },
      { status: 'running' },
      {},
      { flaky: true, status: 'passed' },
    ] as RunFilters[]) {
      const plan = planRunQuery('o', f);
      expect(indexes.get(plan.indexName)).toBe(plan.keyName);
    }
  });
});

describe('run cursors', () => {
  const key = '2026-01-02T03:04:05.000Z#run1';
  const f: RunFilters = { testId: 't', status: 'failed' };
  test('round-trips for the same org and filter, and is opaque', () => {
    const cursor = encodeRunCursor('org1', f, key);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(cursor).not.toContain('org1');
    expect(decodeRunCursor('org1', { ...f }, cursor)).toBe(key);
  });
  test.each([
    ['another org', () => decodeRunCursor('org2', f, encodeRunCursor('org1', f, key))],
    ['another filter', () => decodeRunCursor('org1', { testId: 't' }, encodeRunCursor('org1', f, key))],
    [
      'an added folder',
      () => decodeRunCursor('org1', { ...f, folderId: 'x' }, encodeRunCursor('org1', f, key)),
    ],
    ['flaky added', () => decodeRunCursor('org1', { ...f, flaky: true }, encodeRunCursor('org1', f, key))],
    ['flaky dropped', () => decodeRunCursor('org1', f, encodeRunCursor('org1', { ...f, flaky: true }, key))],
    ['not base64url', () => decodeRunCursor('org1', f, 'a+b/c=')],
    ['not JSON', () => decodeRunCursor('org1', f, Buffer.from('nope').toString('base64url'))],
    ['JSON null', () => decodeRunCursor('org1', f, Buffer.from('null').toString('base64url'))],
    ['empty', () => decodeRunCursor('org1', f, '')],
    [
      'an edited key',
      () => {
        const { b } = JSON.parse(Buffer.from(encodeRunCursor('org1', f, key), 'base64url').toString());
        const edited = { k: '2027-01-02T03:04:05.000Z#run1', b };
        return decodeRunCursor('org1', f, Buffer.from(JSON.stringify(edited)).toString('base64url'));
      },
    ],
    [
      'a key that is not a created key',
      () => {
        const k = 'x'.repeat(300);
        return decodeRunCursor('org1', f, Buffer.from(JSON.stringify({ k, b: 'y' })).toString('base64url'));
      },
    ],
  ])('%s is a ValidationError naming cursor', (_what, decode) => {
    expect(decode).toThrow(ValidationError);
    expect(decode).toThrow(/^invalid query: cursor: /);
  });
});

describe('matchesFilters', () => {
  test.each([
    [{}, true],
    [{ testId: 'test1' }, true],
    [{ testId: 'test2' }, false],
    [{ folderId: 'f1', status: 'pending' as const }, true],
    [{ folderId: 'f1', status: 'passed' as const }, false],
    [{ folderId: 'f2' }, false],
    [{ flaky: true }, false],
    [{ flaky: false }, true],
  ])('%j → %s', (filters, expected) => {
    expect(matchesFilters(run(), filters)).toBe(expected);
  });
  test('flaky keeps a run that passed after a failed attempt', () => {
    expect(matchesFilters(run({ status: 'passed', flaky: true }), { flaky: true, status: 'passed' })).toBe(
      true,
    );
  });
});

describe('query fields', () => {
  test('queryBoolean: only true and false; absent is false', () => {
    expect(queryBoolean.parse('true')).toBe(true);
    expect(queryBoolean.parse('false')).toBe(false);
    expect(queryBoolean.parse(undefined)).toBe(false);
    for (const bad of ['TRUE', '1', 'yes', '']) expect(queryBoolean.safeParse(bad).success).toBe(false);
  });
  test('queryInteger: plain digits within bounds', () => {
    const limit = queryInteger(1, 100);
    expect(limit.parse('1')).toBe(1);
    expect(limit.parse('100')).toBe(100);
    for (const bad of ['0', '101', '1.5', '-1', '1e2', ' 5', 'abc', '']) {
      const r = limit.safeParse(bad);
      expect({ bad, ok: r.success, message: r.error?.issues[0]?.message }).toEqual({
        bad,
        ok: false,
        message: 'must be an integer from 1 to 100',
      });
    }
    expect(queryInteger(0).parse('0')).toBe(0);
    expect(queryInteger(0).safeParse('-1').error?.issues[0]?.message).toBe('must be an integer >= 0');
  });
});
