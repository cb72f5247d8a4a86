import { describe, expect, test } from '@jest/globals';
import { tableNames, tables } from '../manifest/tables.js';
import { parseConfig } from './config.js';
import { ConfigError } from './errors.js';

const tableEnv = Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`]));

describe('parseConfig', () => {
  test('PUBLIC_URL: the base URL of the merge gate links, trailing slash dropped; a bad one names itself', () => {
    const aws = { ...tableEnv, AWS_REGION: 'eu-west-1' };
    expect(parseConfig(aws).publicUrl).toBeUndefined();
    expect(parseConfig({ ...aws, PUBLIC_URL: 'https://p.example.com/v1/' }).publicUrl).toBe(
      'https://p.example.com/v1',
    );
    for (const bad of ['p.example.com', 'https://p.example.com/?a=1', 'https://p.example.com/#x', 'ftp://p'])
      expect(() => parseConfig({ ...aws, PUBLIC_URL: bad })).toThrow(/PUBLIC_URL: must be the base URL/);
  });

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

  test('PREVIEW_APP_PORTS: a range FIRST-LAST of unprivileged ports, parsed once; a bad one names itself', () => {
    const local = { ...tableEnv, PREVIEW_MODE: 'local', PREVIEW_DATA_DIR: '/tmp/d' };
    expect(parseConfig(local).appPorts).toBeUndefined();
    expect(parseConfig({ ...local, PREVIEW_APP_PORTS: '40000-40999' }).appPorts).toEqual({
      first: 40000,
      last: 40999,
    });
    expect(parseConfig({ ...local, PREVIEW_APP_PORTS: ' 41000 - 41000 ' }).appPorts).toEqual({
      first: 41000,
      last: 41000,
    });
    for (const bad of ['40000', '40000:40999', '40999-40000', '80-90', '60000-70000', 'a-b'])
      expect(() => parseConfig({ ...local, PREVIEW_APP_PORTS: bad })).toThrow(/PREVIEW_APP_PORTS: must be/);
  });

  test('the EKS cluster: validated with the rest at cold start, parsed once', () => {
    const base = { ...tableEnv, AWS_REGION: 'eu-west-1', EKS_CLUSTER_NAME: 'previews' };
    const c = parseConfig({
      ...base,
      EKS_CLUSTER_ENDPOINT: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com',
      EKS_CLUSTER_CA_DATA: 'Y2E=',
      EKS_INGRESS_CLASS: 'alb',
      EKS_INGRESS_DOMAIN: 'previews.example.com',
      EKS_INGRESS_ANNOTATIONS: '{"alb.ingress.kubernetes.io/scheme":"internet-facing"}',
      EKS_ALLOW_FROM_CIDRS: '203.0.113.0/24,2001:db8::/32',
      EKS_ROUTING: 'ingress',
    });
    expect(JSON.parse(JSON.stringify(c.eks))).toEqual({
      clusterName: 'previews',
      api: { endpoint: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com', caData: 'Y2E=' },
      routing: 'ingress',
      protection: 'none',
      ingressClassName: 'alb',
      domain: 'previews.example.com',
      ingressAnnotations: { 'alb.ingress.kubernetes.io/scheme': 'internet-facing' },
      allowFromCidrs: ['203.0.113.0/24', '2001:db8::/32'],
    });
    // A bad EKS variable fails the whole configuration, beside any other bad one, whatever the function.
    const attempt = () =>
      parseConfig({
        ...base,
        DYNAMODB_ENDPOINT: 'not a url',
        EKS_CLUSTER_CA_DATA: 'Y2E=',
        EKS_INGRESS_ANNOTATIONS: '["not", "an object"]',
      });
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(/DYNAMODB_ENDPOINT: /);
    expect(attempt).toThrow(/EKS_INGRESS_ANNOTATIONS: must be a JSON object of strings/);
    expect(attempt).toThrow(/EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA are set together or not at all/);
  });
});
