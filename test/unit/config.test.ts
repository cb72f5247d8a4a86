import { describe, expect, test } from '@jest/globals';
import { tableNames, tables } from '../../functions/manifest/tables.js';
import { parseConfig } from '../../functions/shared/config.js';
import { ConfigError } from '../../functions/shared/errors.js';

const tableEnv = Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`]));

describe('parseConfig', () => {
  test('aws mode with every table name and a region', () => {
    const c = parseConfig({ ...tableEnv, AWS_REGION: 'eu-west-1', STATE_MACHINE_DEPLOY_ARN: 'arn:x' });
    expect(c.mode).toBe('aws');
    expect(c.region).toBe('eu-west-1');
    expect(c.tableNames.runs).toBe('t-runs');
    expect(c.stateMachines.deploy).toBe('arn:x');
    expect(c.secretNamePrefix).toBe('preview');
  });

  test('fails fast naming every missing or bad variable', () => {
    const { TABLE_RUNS: _runs, ...rest } = tableEnv;
    const attempt = () => parseConfig({ ...rest, PREVIEW_MODE: 'cloud', DYNAMODB_ENDPOINT: 'not a url' });
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(/TABLE_RUNS/);
    expect(attempt).toThrow(/PREVIEW_MODE/);
    expect(attempt).toThrow(/DYNAMODB_ENDPOINT/);
  });

  test('each mode requires its own settings', () => {
    expect(() => parseConfig({ ...tableEnv })).toThrow(/AWS_REGION: required in aws mode/);
    expect(() => parseConfig({ ...tableEnv, PREVIEW_MODE: 'local' })).toThrow(
      /PREVIEW_DATA_DIR: required in local mode/,
    );
  });
});
