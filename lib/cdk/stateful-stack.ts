import { RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type { Construct } from 'constructs';
import {
  type KeyDef,
  type TableDef,
  type TableName,
  tableNames,
  tables,
} from '../../functions/manifest/tables.js';

const attribute = (key: KeyDef): dynamodb.Attribute => ({
  name: key.name,
  type: key.type === 'N' ? dynamodb.AttributeType.NUMBER : dynamodb.AttributeType.STRING,
});

/** `secretBundles` → `SecretBundles`: construct ids and output names. */
export const pascal = (name: string): string => name.charAt(0).toUpperCase() + name.slice(1);

/**
 * The stateful stack: every DynamoDB table of functions/manifest/tables.ts (the same definitions the local
 * server creates in dynalite). Tables are retained when the stack or a table is removed, on-demand,
 * encrypted with the AWS-managed key and recoverable to any point in the last 35 days. No physical
 * names: CloudFormation names them, so several stages coexist in one account.
 */
export class StatefulStack extends Stack {
  readonly tables = {} as Record<TableName, dynamodb.Table>;

  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);
    for (const name of tableNames) this.tables[name] = this.table(pascal(name), tables[name]);
  }

  private table(id: string, def: TableDef): dynamodb.Table {
    const table = new dynamodb.Table(this, id, {
      partitionKey: attribute(def.partitionKey),
      sortKey: def.sortKey && attribute(def.sortKey),
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: RemovalPolicy.RETAIN,
      timeToLiveAttribute: def.ttlAttribute,
    });
    for (const index of def.indexes) {
      table.addGlobalSecondaryIndex({
        indexName: index.name,
        partitionKey: attribute(index.partitionKey),
        sortKey: index.sortKey && attribute(index.sortKey),
        projectionType: dynamodb.ProjectionType.ALL,
      });
    }
    return table;
  }
}
