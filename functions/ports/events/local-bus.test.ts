import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { eventRules } from '../../manifest/events.js';
import {
  assertPatternsSupported,
  LocalBus,
  matchesPattern,
  serviceBusRules,
  unsupportedPatternForm,
} from './local-bus.js';
import type { DeliveredEvent } from './port.js';

/*
 * The local bus's matcher against the examples of AWS's EventBridge user guide ("Event pattern syntax",
 * "Arrays in Amazon EventBridge event patterns", "Matching events on null values and empty strings"), and
 * its refusal of every pattern form it does not implement.
 */

/** An event as EventBridge delivers it; `fields` replace or add top-level fields. */
const event = (fields: Partial<DeliveredEvent> & Record<string, unknown>): DeliveredEvent => ({
  version: '0',
  id: '6a7e8feb-b491-4cf7-a9f1-bf3703467718',
  'detail-type': 'EC2 Instance State-change Notification',
  source: 'aws.ec2',
  account: '111122223333',
  time: '2017-12-22T18:43:48Z',
  region: 'us-west-1',
  resources: ['arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0'],
  detail: { 'instance-id': 'i-1234567890abcdef0', state: 'terminated' },
  ...fields,
});

describe('exact-value matching, as AWS documents it', () => {
  test('the guide’s EC2 example: source, detail-type and detail.state must all match', () => {
    const pattern = {
      source: ['aws.ec2'],
      'detail-type': ['EC2 Instance State-change Notification'],
      detail: { state: ['terminated'] },
    };
    expect(matchesPattern(pattern, event({}))).toBe(true);
    expect(matchesPattern(pattern, event({ detail: { state: 'running' } }))).toBe(false);
    expect(matchesPattern(pattern, event({ source: 'aws.fargate' }))).toBe(false);
    // Values match exactly, case included.
    expect(matchesPattern(pattern, event({ detail: { state: 'Terminated' } }))).toBe(false);
  });

  test('a list is any of its values: ["aws.ec2", "aws.fargate"]', () => {
    const pattern = { source: ['aws.ec2', 'aws.fargate'] };
    expect(matchesPattern(pattern, event({ source: 'aws.ec2' }))).toBe(true);
    expect(matchesPattern(pattern, event({ source: 'aws.fargate' }))).toBe(true);
    expect(matchesPattern(pattern, event({ source: 'aws.s3' }))).toBe(false);
  });

  test('a list in the event matches when it shares a value with the pattern’s (the resources example)', () => {
    const pattern = {
      resources: [
        'arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f',
        'arn:aws:ec2:us-east-1:111122223333:instance/i-b188560f',
        'arn:aws:ec2:us-east-1:444455556666:instance/i-b188560f',
      ],
    };
    const asg =
      'arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:eb56d16b-bbf0-401d-b893-d5978ed4a025:autoScalingGroupName/ASGTerminate';
    expect(
      matchesPattern(
        pattern,
        event({ resources: [asg, 'arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f'] }),
      ),
    ).toBe(true);
    expect(matchesPattern(pattern, event({ resources: [asg] }))).toBe(false);
    expect(matchesPattern(pattern, event({ resources: [] }))).toBe(false);
  });

  test('every field the pattern names must be in the event, with the same nesting', () => {
    const pattern = { detail: { state: ['terminated'] } };
    expect(matchesPattern(pattern, event({ detail: { 'instance-id': 'i-1' } }))).toBe(false);
    // The field at another level is not the field.
    expect(matchesPattern(pattern, event({ state: 'terminated', detail: {} }))).toBe(false);
    expect(matchesPattern({ detail: { a: { b: ['x'] } } }, event({ detail: { a: { b: 'x' } } }))).toBe(true);
    expect(matchesPattern({ detail: { a: { b: ['x'] } } }, event({ detail: { a: 'x' } }))).toBe(false);
    // Fields of the event the pattern does not name are ignored.
    expect(matchesPattern({ detail: { state: ['terminated'] } }, event({}))).toBe(true);
  });

  test('null and the empty string each match themselves, and are not interchangeable', () => {
    const e = event({
      'detail-type': 'EC2 Instance Launch Successful',
      source: 'aws.autoscaling',
      resources: [],
      detail: { eventVersion: '', responseElements: null },
    });
    expect(matchesPattern({ detail: { eventVersion: [''] } }, e)).toBe(true);
    expect(matchesPattern({ detail: { responseElements: [null] } }, e)).toBe(true);
    expect(matchesPattern({ detail: { eventVersion: [null] } }, e)).toBe(false);
    expect(matchesPattern({ detail: { responseElements: [''] } }, e)).toBe(false);
  });

  test('numbers and booleans match by value and type', () => {
    const e = event({ detail: { count: 5, ok: true } });
    expect(matchesPattern({ detail: { count: [5], ok: [true] } }, e)).toBe(true);
    expect(matchesPattern({ detail: { count: ['5'] } }, e)).toBe(false);
    expect(matchesPattern({ detail: { ok: ['true'] } }, e)).toBe(false);
  });
});

describe('pattern forms the local bus does not implement', () => {
  const forms: [string, unknown, string][] = [
    ['prefix', { detail: { ref: [{ prefix: 'refs/heads/' }] } }, 'detail.ref uses the "prefix" operator'],
    ['suffix', { detail: { key: [{ suffix: '.png' }] } }, 'detail.key uses the "suffix" operator'],
    [
      'anything-but',
      { detail: { state: [{ 'anything-but': 'x' }] } },
      'detail.state uses the "anything-but" operator',
    ],
    ['numeric', { detail: { n: [{ numeric: ['>', 0] }] } }, 'detail.n uses the "numeric" operator'],
    ['exists', { detail: { app: [{ exists: false }] } }, 'detail.app uses the "exists" operator'],
    ['wildcard', { source: [{ wildcard: 'preview.*' }] }, 'source uses the "wildcard" operator'],
    [
      'equals-ignore-case',
      { detail: { a: [{ 'equals-ignore-case': 'X' }] } },
      'detail.a uses the "equals-ignore-case" operator',
    ],
    ['cidr', { detail: { ip: [{ cidr: '10.0.0.0/24' }] } }, 'detail.ip uses the "cidr" operator'],
    ['$or', { detail: { $or: [{ a: ['x'] }, { b: ['y'] }] } }, 'detail uses the "$or" operator'],
    [
      '$or at the top',
      { $or: [{ source: ['a'] }, { source: ['b'] }] },
      'the pattern uses the "$or" operator',
    ],
    [
      'an operator after exact values',
      { source: ['a', { prefix: 'b' }] },
      'source uses the "prefix" operator',
    ],
    ['a bare value', { source: 'preview.github' }, 'source uses a bare string (not a list)'],
    ['an empty list', { source: [] }, 'source uses an empty list'],
    ['a nested list', { source: [['a']] }, 'source uses a nested list'],
  ];

  test.each(forms)('%s: refused, naming the rule, the field and the form', (_name, pattern, says) => {
    const bad = unsupportedPatternForm(pattern);
    expect(bad).toBeDefined();
    expect(() => assertPatternsSupported({ myRule: { pattern } as never })).toThrow(
      `event rule myRule: ${says}`,
    );
  });

  test('the bus refuses such a rule when it is built (the server’s start), not at the first event', () => {
    const dir = mkdtempSync(join(tmpdir(), 'local-bus-'));
    try {
      const rules = {
        onPushToMain: {
          pattern: {
            source: ['preview.github'],
            'detail-type': ['Push'],
            detail: { ref: [{ prefix: 'refs/' }] },
          },
          target: { entry: 'nowhere.ts' },
        },
      };
      expect(() => new LocalBus({ repoRoot: dir, dataDir: dir, rules: rules as never })).toThrow(
        /^event rule onPushToMain: detail\.ref uses the "prefix" operator, which the local event bus does not implement/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the event manifest', () => {
  const dir = mkdtempSync(join(tmpdir(), 'local-bus-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('every rule the local bus delivers uses only forms it implements', () => {
    const rules = serviceBusRules();
    expect(Object.keys(rules).length).toBeGreaterThan(0);
    for (const [id, rule] of Object.entries(rules))
      expect([id, unsupportedPatternForm(rule.pattern)]).toEqual([id, undefined]);
    expect(() => new LocalBus({ repoRoot: dir, dataDir: dir })).not.toThrow();
  });

  test('so do the default bus’s rules (the image build’s), should the local bus ever take them', () => {
    for (const [id, rule] of Object.entries(eventRules))
      expect([id, unsupportedPatternForm(rule.pattern)]).toEqual([id, undefined]);
  });
});
