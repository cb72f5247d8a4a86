import { describe, expect, test } from '@jest/globals';
import { helpFor, isOpsCommand, OPS_USAGE } from '../../lib/local/cli-ops.js';

const USAGE = `usage: previewctl <command>

  apps create --org ORG
      create an application
  envs wait --org ORG --repo R --pr N
      poll until ready
      (exit 0) or failed

Local mode …`;

describe('helpFor', () => {
  test('no help asked: undefined', () => {
    expect(helpFor(['apps', 'create', '--org', 'x'], USAGE)).toBeUndefined();
  });
  test('--help, -h and help alone: all of it', () => {
    expect(helpFor(['--help'], USAGE)).toBe(USAGE);
    expect(helpFor(['-h'], USAGE)).toBe(USAGE);
    expect(helpFor(['help'], USAGE)).toBe(USAGE);
  });
  test("a command's help: its block only", () => {
    const wait =
      'usage: previewctl envs wait --org ORG --repo R --pr N\n      poll until ready\n      (exit 0) or failed';
    expect(helpFor(['envs', 'wait', '--help'], USAGE)).toBe(wait);
    expect(helpFor(['help', 'envs', 'wait'], USAGE)).toBe(wait);
    expect(helpFor(['apps', 'create', '-h'], USAGE)).toBe(
      'usage: previewctl apps create --org ORG\n      create an application',
    );
  });
  test('an unknown command: all of it', () => {
    expect(helpFor(['help', 'frob'], USAGE)).toBe(USAGE);
  });
});

test('isOpsCommand names the read commands only', () => {
  expect(isOpsCommand(['envs', 'wait', '--org', 'o'])).toBe(true);
  expect(isOpsCommand(['--json', 'runs', 'get'])).toBe(true);
  expect(isOpsCommand(['apps', 'create'])).toBe(false);
});

test('envs logs is an ops command, in the full help and with a help of its own', () => {
  expect(isOpsCommand(['envs', 'logs', '--org', 'o', '--app', 'web'])).toBe(true);
  expect(OPS_USAGE).toContain('  envs logs --org ORG --repo owner/repo --pr N --app APP [--tail N]');
  expect(helpFor(['envs', 'logs', '--help'], OPS_USAGE)).toMatch(
    /^usage: previewctl envs logs --org ORG --repo owner\/repo --pr N --app APP \[--tail N\] \[--source app\|build\]\n {6}the end of an app's output/,
  );
});
