import { describe, expect, test } from '@jest/globals';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import {
  type KeyDef,
  type Projection,
  RUN_LISTING,
  type TableDef,
  tableNames,
  tables,
} from '../../functions/manifest/tables.js';
import { resourcesOf, synthesize } from './synth.js';

const keySchema = (partitionKey: KeyDef, sortKey?: KeyDef) => [
  { AttributeName: partitionKey.name, KeyType: 'HASH' },
  ...(sortKey ? [{ AttributeName: sortKey.name, KeyType: 'RANGE' }] : []),
];

describe('stateful stack', () => {
  // Prepare
  const { stateful, statefulTemplate } = synthesize();
  const cfnTables = resourcesOf(statefulTemplate, 'AWS::DynamoDB::Table');
  const logicalIdOf = (name: keyof typeof tables) =>
    stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);

  test('has exactly one table per definition in functions/manifest/tables.ts', () => {
    expect(Object.keys(cfnTables).sort()).toEqual(tableNames.map(logicalIdOf).sort());
  });

  /** The CloudFormation projection of a manifest index (`ALL` unless it says otherwise). */
  const projectionOf = (p: Projection = 'ALL') =>
    p === 'ALL' || p === 'KEYS_ONLY'
      ? { ProjectionType: p }
      : { ProjectionType: 'INCLUDE', NonKeyAttributes: [...p.include] };

  test('runs: per filter GET /run allows, a keys-only listing index and a page index beside it', () => {
    const indexes = cfnTables[logicalIdOf('runs')].Properties.GlobalSecondaryIndexes as {
      IndexName: string;
      KeySchema: { AttributeName: string; KeyType: string }[];
      Projection: { ProjectionType: string; NonKeyAttributes?: string[] };
    }[];
    expect(indexes.length).toBeLessThanOrEqual(20);
    expect(
      Object.fromEntries(
        indexes.map((ix) => [ix.IndexName, ix.KeySchema.map((k) => k.AttributeName).join(',')]),
      ),
    ).toEqual({
      listOrg: 'orgId,createdKey',
      listTest: 'testKey,createdKey',
      listFolder: 'folderKey,createdKey',
      listStatus: 'statusKey,createdKey',
      listTestStatus: 'testStatusKey,createdKey',
      listFolderStatus: 'folderStatusKey,createdKey',
      pageOrg: 'orgId,createdKey',
      pageTest: 'testKey,createdKey',
      pageFolder: 'folderKey,createdKey',
      pageStatus: 'statusKey,createdKey',
      pageTestStatus: 'testStatusKey,createdKey',
      pageFolderStatus: 'folderStatusKey,createdKey',
      listFlaky: 'flakyKey,createdKey',
      listHealed: 'healedKey,createdKey',
    });
    for (const ix of indexes)
      if (ix.IndexName === 'listOrg')
        expect(ix.Projection).toEqual({
          ProjectionType: 'INCLUDE',
          NonKeyAttributes: ['testId', 'name', 'status', 'createdAt', 'applicationVersionId'],
        });
      else if (ix.IndexName === 'pageOrg')
        expect(ix.Projection).toEqual({ ProjectionType: 'INCLUDE', NonKeyAttributes: [...RUN_LISTING] });
      else if (ix.IndexName === 'listFlaky')
        // Flaky runs: sparse, both the listing and the page index of flaky=true.
        expect(ix.Projection).toEqual({
          ProjectionType: 'INCLUDE',
          NonKeyAttributes: ['orgId', ...RUN_LISTING, 'flaky'],
        });
      else if (ix.IndexName.startsWith('page'))
        expect(ix.Projection).toEqual({
          ProjectionType: 'INCLUDE',
          NonKeyAttributes: ['orgId', ...RUN_LISTING],
        });
      else expect(ix.Projection).toEqual({ ProjectionType: 'KEYS_ONLY' });
    // DynamoDB allows at most 100 projected non-key attributes over all of a table's indexes.
    expect(
      indexes.reduce((n, ix) => n + (ix.Projection.NonKeyAttributes?.length ?? 0), 0),
    ).toBeLessThanOrEqual(100);
  });

  test.each(tableNames)('table %s matches its definition', (name) => {
    // Prepare
    const def: TableDef = tables[name];
    // Act
    const table = cfnTables[logicalIdOf(name)];
    // Assess
    expect(table.DeletionPolicy).toBe('Retain');
    expect(table.UpdateReplacePolicy).toBe('Retain');
    const props = table.Properties;
    expect(props.TableName).toBeUndefined();
    expect(props.BillingMode).toBe('PAY_PER_REQUEST');
    expect(props.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    expect(props.SSESpecification).toEqual({ SSEEnabled: true });
    expect(props.KeySchema).toEqual(keySchema(def.partitionKey, def.sortKey));
    const indexes = (props.GlobalSecondaryIndexes ?? []) as { IndexName: string }[];
    expect(indexes).toEqual(
      def.indexes.map((index) => ({
        IndexName: index.name,
        KeySchema: keySchema(index.partitionKey, index.sortKey),
        Projection: projectionOf(index.projection),
      })),
    );
    const keys = [def.partitionKey, def.sortKey, ...def.indexes.flatMap((i) => [i.partitionKey, i.sortKey])];
    const expected = new Map(keys.filter((k) => k !== undefined).map((k) => [k.name, k.type]));
    expect(props.AttributeDefinitions).toHaveLength(expected.size);
    for (const attr of props.AttributeDefinitions as { AttributeName: string; AttributeType: string }[]) {
      expect(attr.AttributeType).toBe(expected.get(attr.AttributeName));
    }
    const ttl = (def as { ttlAttribute?: string }).ttlAttribute;
    if (ttl) expect(props.TimeToLiveSpecification).toEqual({ AttributeName: ttl, Enabled: true });
    else expect(props.TimeToLiveSpecification).toBeUndefined();
  });

  test('builds expire by TTL on expiresAt (a build whose completion never arrives leaves no record)', () => {
    const builds = cfnTables[logicalIdOf('builds')];
    expect(tables.builds.ttlAttribute).toBe('expiresAt');
    expect(builds.Properties.TimeToLiveSpecification).toEqual({ AttributeName: 'expiresAt', Enabled: true });
  });

  test('is env-agnostic and named per stage, so a second stage coexists', () => {
    // Act
    const prod = synthesize({ stage: 'prod' });
    // Assess
    expect(stateful.stackName).toBe('preview-dev-stateful');
    expect(prod.stateful.stackName).toBe('preview-prod-stateful');
    expect(prod.stateless.stackName).toBe('preview-prod-stateless');
    for (const stack of [stateful, prod.stateful, prod.stateless]) {
      expect(stack.resolve(stack.account)).toEqual({ Ref: 'AWS::AccountId' });
      expect(stack.resolve(stack.region)).toEqual({ Ref: 'AWS::Region' });
    }
  });

  test('rejects a stage that cannot name a stack', () => {
    expect(() => synthesize({ stage: 'Prod_1' })).toThrow(/context "stage"/);
  });
});
