import { afterAll } from '@jest/globals';
import { tableNames, tables } from '../../functions/manifest/tables.js';

/**
 * A unit test of code that reads the stack's settings, run as in AWS: `PREVIEW_MODE=aws`, a region,
 * every table's name variable (`t-<table>`), and `extra`. The process's own settings come back after
 * the file's (or the describe block's) tests. DynamoDB itself is mocked at the SDK boundary by the test.
 */
export function useAwsSettings(extra: Record<string, string> = {}): void {
  const saved = { ...process.env };
  Object.assign(process.env, {
    PREVIEW_MODE: 'aws',
    AWS_REGION: 'eu-west-1',
    ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
    ...extra,
  });
  afterAll(() => {
    process.env = saved;
  });
}
