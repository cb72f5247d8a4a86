import { CfnOutput, Duration, RemovalPolicy, SecretValue, Stack, type StackProps, Token } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import {
  type KeyDef,
  type Projection,
  type TableDef,
  type TableName,
  tableNames,
  tables,
} from '../../functions/manifest/tables.js';
import { addBuildCacheLifecycle, type BuildCacheLifecycleOptions } from './constructs/build-cache.js';
import { acknowledge } from './nag.js';

/**
 * The value the stack gives the GitHub App secret it creates: the shape the operator fills, every field
 * empty, which the GitHub App adapter rejects as not filled in. CloudFormation writes it only when the
 * secret is created (or this value changes), never over the operator's value on a later deploy, so it
 * must never change.
 */
export const githubAppSecretPlaceholder = JSON.stringify({ appId: '', privateKey: '', webhookSecret: '' });

/** A complete secret ARN: `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 chars>`. */
const completeSecretArn = /^arn:[\w-]+:secretsmanager:[\w-]+:\d{12}:secret:.+-[A-Za-z0-9]{6}$/;

export interface StatefulStackProps extends StackProps, BuildCacheLifecycleOptions {
  /**
   * The complete ARN (with its 6-character suffix) of an existing secret holding the GitHub App's
   * `{"appId","privateKey","webhookSecret"}`, used instead of a secret of this stack. Its encryption key,
   * if a customer-managed one, must let the source-host functions decrypt.
   * @default - the stack creates an empty secret (placeholder JSON) for the operator to fill
   */
  githubAppSecretArn?: string;
  /**
   * Images kept in the image repository, newest first (the oldest beyond it expire). Keep it above the
   * number of images running preview environments can use at once: a node that must pull an expired image
   * cannot start the pod.
   * @default 1000
   */
  imageRetentionCount?: number;
  /**
   * How long an untagged image stays (an image becomes untagged when a build re-points its tag: a layer
   * cache a newer build of its app replaced, say).
   * @default Duration.days(1)
   */
  untaggedImageExpiry?: Duration;
}

const attribute = (key: KeyDef): dynamodb.Attribute => ({
  name: key.name,
  type: key.type === 'N' ? dynamodb.AttributeType.NUMBER : dynamodb.AttributeType.STRING,
});

/** `secretBundles` → `SecretBundles`: construct ids and output names. */
export const pascal = (name: string): string => name.charAt(0).toUpperCase() + name.slice(1);

/**
 * The stateful stack: what a redeploy of the stateless stack must not lose, all retained when the stack or
 * the resource is removed. No physical names: CloudFormation names them, so several stages coexist in one
 * account.
 * - Every DynamoDB table of functions/manifest/tables.ts (the same definitions the local server creates in
 *   dynalite): on-demand, encrypted with the AWS-managed key, recoverable to any point in the last 35 days,
 *   TTL on the attribute the definition names.
 * - The GitHub App secret, which the operator fills once (its ARN is an output).
 * - The image repository: running preview environments pull their images from it (by digest).
 */
export class StatefulStack extends Stack {
  readonly tables = {} as Record<TableName, dynamodb.Table>;
  /** The GitHub App's credentials: `{"appId","privateKey","webhookSecret"}`. */
  readonly githubAppSecret: secretsmanager.ISecret;
  /** Every app image, tagged per app and commit. */
  readonly imageRepository: ecr.Repository;

  constructor(scope: Construct, id: string, props: StatefulStackProps = {}) {
    super(scope, id, props);
    for (const name of tableNames) this.tables[name] = this.table(pascal(name), tables[name]);
    this.githubAppSecret = this.githubApp(props.githubAppSecretArn);
    this.imageRepository = this.repository(props);
    new CfnOutput(this, 'GithubAppSecretArn', {
      value: this.githubAppSecret.secretArn,
      description: 'Secret to fill with the GitHub App: {"appId","privateKey","webhookSecret"}',
    });
    new CfnOutput(this, 'ImageRepositoryUri', { value: this.imageRepository.repositoryUri });
  }

  private githubApp(existingArn: string | undefined): secretsmanager.ISecret {
    if (existingArn !== undefined) {
      if (!Token.isUnresolved(existingArn) && !completeSecretArn.test(existingArn)) {
        throw new Error(
          `githubAppSecretArn must be a complete secret ARN, ending in the 6-character suffix (got "${existingArn}")`,
        );
      }
      return secretsmanager.Secret.fromSecretCompleteArn(this, 'GithubAppSecret', existingArn);
    }
    const secret = new secretsmanager.Secret(this, 'GithubAppSecret', {
      description:
        'GitHub App of the preview control plane. Fill with {"appId": "...", "privateKey": "-----BEGIN ' +
        'RSA PRIVATE KEY-----...", "webhookSecret": "..."}',
      // Not a secret: the empty shape, which the adapter refuses with a message saying to fill it in.
      secretStringValue: SecretValue.unsafePlainText(githubAppSecretPlaceholder),
      removalPolicy: RemovalPolicy.RETAIN,
    });
    acknowledge(
      secret,
      'AwsSolutions-SMG4',
      'The GitHub App private key and webhook secret are issued by GitHub, not by a service Secrets Manager ' +
        'can rotate: the operator rotates them in the GitHub App settings and puts the new values here.',
    );
    return secret;
  }

  /**
   * App images and their builds' layer caches. Tags are MUTABLE on purpose: an image tag names an app's
   * build identity (its inputs, docs/builds.md), which two racing builds of the same inputs may both push,
   * and an app's layer cache tag moves with each build; deployments pin the digest, never the tag.
   * Scanned on push; the newest `imageRetentionCount` images are kept, the newest
   * `buildCacheRetentionCount` layer caches apart from them, and untagged ones expire after
   * `untaggedImageExpiry`.
   */
  private repository(props: StatefulStackProps): ecr.Repository {
    const repository = new ecr.Repository(this, 'ImageRepository', {
      imageScanOnPush: true,
      imageTagMutability: ecr.TagMutability.MUTABLE,
      encryption: ecr.RepositoryEncryption.AES_256,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    repository.addLifecycleRule({
      rulePriority: 1,
      description: 'Images a build left untagged (a layer cache a newer build replaced)',
      tagStatus: ecr.TagStatus.UNTAGGED,
      maxImageAge: props.untaggedImageExpiry ?? Duration.days(1),
    });
    addBuildCacheLifecycle(repository, 2, props);
    repository.addLifecycleRule({
      description: 'Keep the newest images',
      tagStatus: ecr.TagStatus.ANY,
      rulePriority: 3,
      maxImageCount: props.imageRetentionCount ?? 1000,
    });
    return repository;
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
        ...projectionOf(index.projection),
      });
    }
    return table;
  }
}

/** The CDK projection of a manifest index (`ALL` unless it says otherwise). */
function projectionOf(projection: Projection = 'ALL'): {
  projectionType: dynamodb.ProjectionType;
  nonKeyAttributes?: string[];
} {
  if (projection === 'ALL') return { projectionType: dynamodb.ProjectionType.ALL };
  if (projection === 'KEYS_ONLY') return { projectionType: dynamodb.ProjectionType.KEYS_ONLY };
  return { projectionType: dynamodb.ProjectionType.INCLUDE, nonKeyAttributes: [...projection.include] };
}
