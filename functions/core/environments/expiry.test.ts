import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { sampleEnvironment } from '../../../test/support/environments.js';
import { setLogSink } from '../../shared/log.js';
import {
  expiryOf,
  FENCE_RETENTION_MS,
  STRANDED_DEPLOY_MS,
  STRANDED_TEARDOWN_MS,
  strandedWork,
  sweepFences,
} from './expiry.js';

describe('expiry', () => {
  const at = (iso: string) => new Date(iso);
  test('72 hours after the last deploy, for a settled PR environment', () => {
    expect(expiryOf(sampleEnvironment(), 72)).toEqual(at('2030-01-04T00:00:00.000Z'));
    expect(expiryOf(sampleEnvironment({ status: 'failed' }), 1)).toEqual(at('2030-01-01T01:00:00.000Z'));
    // Records from before lastDeployAt: their last change.
    expect(expiryOf(sampleEnvironment({ lastDeployAt: undefined }), 1)).toEqual(
      at('2030-01-01T01:01:00.000Z'),
    );
  });
  test('never: ttl 0, the main-branch environment, a deploy in flight, a teardown requested', () => {
    expect(expiryOf(sampleEnvironment(), 0)).toBeUndefined();
    expect(expiryOf(sampleEnvironment({ prNumber: 0 }), 72)).toBeUndefined();
    for (const status of ['pending', 'building', 'deploying', 'torn_down'] as const)
      expect(expiryOf(sampleEnvironment({ status }), 72)).toBeUndefined();
    expect(expiryOf(sampleEnvironment({ tornDownRequested: true }), 72)).toBeUndefined();
  });
});

const NOW = Date.parse('2026-11-22T12:00:00.000Z');
const at = (msAgo: number) => new Date(NOW - msAgo).toISOString();

describe('strandedWork: the work a record claims that nothing is doing', () => {
  test.each([
    [
      'a deploy request picked up by nothing for too long',
      'pending',
      false,
      STRANDED_DEPLOY_MS + 1,
      'deploy',
    ],
    [
      'a deploy request just made (its state machine may be starting)',
      'pending',
      false,
      STRANDED_DEPLOY_MS,
      undefined,
    ],
    [
      'a deploy under way, however long (its steps have their own timeouts)',
      'building',
      false,
      86_400_000,
      undefined,
    ],
    ['a settled environment', 'ready', false, 86_400_000, undefined],
    ['a teardown request with no outcome for too long', 'ready', true, STRANDED_TEARDOWN_MS + 1, 'teardown'],
    ['a teardown of an environment still deploying', 'pending', true, STRANDED_TEARDOWN_MS + 1, 'teardown'],
    ['a teardown request within what its task may take', 'ready', true, STRANDED_TEARDOWN_MS, undefined],
    [
      'a teardown that failed (its error shows; a new DELETE tries again)',
      'failed',
      true,
      86_400_000,
      undefined,
    ],
    ['a teardown that ended', 'torn_down', true, 86_400_000, undefined],
  ] as const)('%s', (_, status, tornDownRequested, ago, work) => {
    expect(strandedWork({ status, tornDownRequested, updatedAt: at(ago) }, NOW)).toBe(work);
  });

  test('a record without a readable date is left alone', () => {
    expect(strandedWork({ status: 'pending', updatedAt: 'not a date' }, NOW)).toBeUndefined();
  });
});

/*
 * A teardown's fence may go once no call of a generation it fences can still arrive (expiry.ts
 * `FENCE_RETENTION_MS`): such calls come from executions started before the teardown, so the fence must
 * outlive the longest run of the machines whose steps call the runtime, recomputed here from the ASL files
 * (a timeout raised there without raising the retention fails this test).
 */

const ROOT = new URL('../../..', import.meta.url).pathname;
interface Retry {
  ErrorEquals: string[];
  IntervalSeconds?: number;
  BackoffRate?: number;
  MaxAttempts?: number;
  MaxDelaySeconds?: number;
}
interface State {
  Type: string;
  TimeoutSeconds?: number;
  Retry?: Retry[];
  Next?: string;
  Default?: string;
  Choices?: { Next: string }[];
  Catch?: { Next: string }[];
}

/** The longest a retrier can add in waits between attempts (full jitter never waits longer). */
function backoffSeconds(r: Retry): number {
  let total = 0;
  for (let k = 0; k < (r.MaxAttempts ?? 3); k++) {
    const wait = (r.IntervalSeconds ?? 1) * (r.BackoffRate ?? 2) ** k;
    total += r.MaxDelaySeconds === undefined ? wait : Math.min(wait, r.MaxDelaySeconds);
  }
  return total;
}

/**
 * The longest run of a machine without loops (asserted), in seconds: every Task of every path taken to its
 * last attempt, each attempt to its timeout. A Task without TimeoutSeconds would be unbounded (refused).
 */
function longestRunSeconds(file: string): number {
  const asl = JSON.parse(readFileSync(join(ROOT, 'statemachines', file), 'utf8')) as {
    StartAt: string;
    States: Record<string, State>;
  };
  const longest = (name: string, path: string[]): number => {
    expect(path).not.toContain(name); // no loops: each path is finite
    const s = asl.States[name]!;
    let own = 0;
    if (s.Type === 'Task') {
      expect({ name, timeout: s.TimeoutSeconds }).toEqual({ name, timeout: expect.any(Number) });
      const attempts = 1 + Math.max(0, ...(s.Retry ?? []).map((r) => r.MaxAttempts ?? 3));
      own = attempts * s.TimeoutSeconds! + Math.max(0, ...(s.Retry ?? []).map(backoffSeconds));
    }
    const next = [
      s.Next,
      s.Default,
      ...(s.Choices ?? []).map((c) => c.Next),
      ...(s.Catch ?? []).map((c) => c.Next),
    ].filter((n): n is string => n !== undefined);
    return own + Math.max(0, ...next.map((n) => longest(n, [...path, name])));
  };
  return longest(asl.StartAt, []);
}

describe('how long a teardown fence is kept', () => {
  test('longer than the longest run of every machine whose steps call the runtime, plus a starter', () => {
    const runs = Object.fromEntries(
      ['deploy.asl.json', 'redeploy-app.asl.json', 'teardown.asl.json'].map((f) => [f, longestRunSeconds(f)]),
    );
    // About 8 hours for the deploy (5 attempts of an hour's BuildImages, 5 of DeployApps' 30 minutes, …).
    expect(runs['deploy.asl.json']).toBeGreaterThan(8 * 3600);
    expect(runs['deploy.asl.json']).toBeLessThan(9 * 3600);
    // An execution may be started from a read made up to one Lambda run (at most 15 minutes) earlier.
    const bound = (Math.max(...Object.values(runs)) + 15 * 60) * 1000;
    expect(FENCE_RETENTION_MS).toBeGreaterThan(bound);
  });
});

describe('sweepFences (the expiry sweep)', () => {
  test('asks the runtime to prune the fences written before now less the retention', async () => {
    const asked: Date[] = [];
    const now = new Date('2031-01-02T00:00:00Z');
    const removed = await sweepFences(
      {
        runtime: {
          pruneFences: async (before) => {
            asked.push(before);
            return { removed: 3 };
          },
        },
      },
      now,
    );
    expect(removed).toBe(3);
    expect(asked).toEqual([new Date(now.getTime() - FENCE_RETENTION_MS)]);
  });

  test('a runtime that fails (the cluster refuses: RBAC from before list/delete) is logged, not thrown', async () => {
    const lines: string[] = [];
    setLogSink((line) => lines.push(line));
    try {
      const forbidden = Object.assign(new Error('list ConfigMaps preview-system: 403 forbidden'), {
        name: 'KubeError',
      });
      const removed = await sweepFences({ runtime: { pruneFences: async () => Promise.reject(forbidden) } });
      expect(removed).toBe(0);
      expect(
        lines.some((l) => l.includes('teardown fences could not be pruned') && l.includes('403 forbidden')),
      ).toBe(true);
    } finally {
      setLogSink(() => undefined);
    }
  });
});
