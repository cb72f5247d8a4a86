import { describe, expect, test } from '@jest/globals';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { artifactKeys, tableNames, tables } from '../../functions/manifest/tables.js';
import { artifactReadActions, artifactWriteActions, sourcesPrefix } from '../../lib/cdk/access.js';
import { githubAppSecretPlaceholder } from '../../lib/cdk/stateful-stack.js';
import {
  bucketId,
  declared,
  envOf,
  functions,
  grantsAbout,
  repositoryId,
  resources,
  secretId,
  sorted,
  stateful,
  statefulTemplate,
  stateless,
  statementsAbout,
  template,
} from './cloud-path-stack.js';
import { asArray, type Json, logicalIdOf, mentions, resourcesOf, statementsOf, synthesize } from './synth.js';

// The cloud path's secret, bucket, repository and least privilege; its image build and event rules are
// in cloud-path-image-build.test.ts and cloud-path-event-rules.test.ts. The defaults' synthesis is
// cloud-path-stack.ts; "context settings" below synthesizes once more, every context setting changed.

describe('GitHub App secret', () => {
  test('the stateful stack creates it empty (the placeholder shape), retained, and outputs its ARN', () => {
    const secrets = resourcesOf(statefulTemplate, 'AWS::SecretsManager::Secret');
    expect(Object.keys(secrets)).toEqual([secretId]);
    const secret = secrets[secretId];
    expect(secret.DeletionPolicy).toBe('Retain');
    expect(secret.Properties.Name).toBeUndefined();
    expect(secret.Properties.GenerateSecretString).toBeUndefined();
    expect(secret.Properties.SecretString).toBe(githubAppSecretPlaceholder);
    expect(JSON.parse(githubAppSecretPlaceholder)).toEqual({ appId: '', privateKey: '', webhookSecret: '' });
    const outputs = Object.values(statefulTemplate.toJSON().Outputs as Record<string, Json>);
    expect(outputs.map((o) => o.Value)).toContainEqual({ Ref: secretId });
  });

  test.each(declared)(
    '%s reads it exactly when it declares sourceHost or prStatus, or takes webhooks',
    (_, fn) => {
      const reads = grantsAbout(fn.id, (s) => s.resources.some((r) => mentions(r, secretId)));
      const env = envOf(fn.id);
      if (fn.access.sourceHost || fn.access.prStatus || fn.auth === 'githubWebhook') {
        expect(reads).toHaveLength(1);
        expect(reads[0]?.actions).toEqual(['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue']);
        expect(reads[0]?.resources).toHaveLength(1);
        expect(mentions(env.GITHUB_APP_SECRET_ARN, secretId)).toBe(true);
        expect(env.GITHUB_API_URL).toBe('https://api.github.com');
      } else {
        expect(reads).toEqual([]);
        expect(env.GITHUB_APP_SECRET_ARN).toBeUndefined();
        expect(env.GITHUB_API_URL).toBeUndefined();
      }
    },
  );
});

describe('artifacts bucket', () => {
  const buckets = resourcesOf(template, 'AWS::S3::Bucket');
  const bucket = buckets[bucketId];
  const mediaId = logicalIdOf(stateless.media);
  const objectsArn = { 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, `/${sourcesPrefix}*`]] };

  test('one of the two buckets (with the media bucket): private, encrypted, unversioned, retained, no physical name', () => {
    expect(sorted(Object.keys(buckets))).toEqual(sorted([bucketId, mediaId]));
    expect(Object.keys(resourcesOf(statefulTemplate, 'AWS::S3::Bucket'))).toEqual([]);
    expect(bucket.DeletionPolicy).toBe('Retain');
    const props = bucket.Properties;
    expect(props.BucketName).toBeUndefined();
    expect(props.BucketEncryption.ServerSideEncryptionConfiguration).toEqual([
      { ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } },
    ]);
    expect(props.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
    expect(props.OwnershipControls.Rules).toEqual([{ ObjectOwnership: 'BucketOwnerEnforced' }]);
    expect(props.VersioningConfiguration).toBeUndefined();
  });

  test('expires every object after 7 days and aborts incomplete multipart uploads after a day', () => {
    expect(bucket.Properties.LifecycleConfiguration.Rules).toEqual([
      expect.objectContaining({
        Status: 'Enabled',
        ExpirationInDays: 7,
        AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
      }),
    ]);
    expect(bucket.Properties.LifecycleConfiguration.Rules[0].Prefix).toBeUndefined();
  });

  test('its policy only denies: plain HTTP and TLS below 1.2; nobody is granted through it', () => {
    const policy = Object.values(resourcesOf(template, 'AWS::S3::BucketPolicy')).find(
      (p) => p.Properties.Bucket.Ref === bucketId,
    );
    expect(policy).toBeDefined();
    const statements = asArray<Json>(policy.Properties.PolicyDocument.Statement);
    expect(statements.every((s) => s.Effect === 'Deny')).toBe(true);
    expect(statements).toContainEqual(
      expect.objectContaining({ Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    );
    expect(statements).toContainEqual(
      expect.objectContaining({ Condition: { NumericLessThan: { 's3:TlsVersion': 1.2 } } }),
    );
  });

  test('every source archive key is under the prefix the grants name', () => {
    const key = artifactKeys.source('org_1', 'Owner/Repo', 'ABC123');
    expect(key.startsWith(sourcesPrefix)).toBe(true);
    expect(key).toBe('sources/org_1/owner/repo/abc123.tar.gz');
  });

  test.each(declared)('%s reaches it exactly as declared (sources/ only)', (_, fn) => {
    const s3 = grantsAbout(
      fn.id,
      (s) => s.actions.some((a) => a.startsWith('s3:')) && mentions(s.resources, bucketId),
    );
    const mode = fn.access.artifacts;
    if (!mode) {
      expect(s3).toEqual([]);
      // Not even its name: `logs` access reads the build log's group, nothing of the artifacts.
      expect(envOf(fn.id).ARTIFACTS_BUCKET).toBeUndefined();
      return;
    }
    expect(s3).toEqual([
      {
        actions: sorted(
          mode === 'RW' ? [...artifactReadActions, ...artifactWriteActions] : artifactReadActions,
        ),
        resources: [objectsArn],
      },
      { actions: ['s3:ListBucket'], resources: [{ 'Fn::GetAtt': [bucketId, 'Arn'] }] },
    ]);
    expect(envOf(fn.id).ARTIFACTS_BUCKET).toEqual({ Ref: bucketId });
  });

  test('FetchSource writes the artifacts, BuildImages only reads them', () => {
    const modes = Object.fromEntries(declared.map(([label, fn]) => [label, fn.access.artifacts]));
    expect(modes['step functions/steps/run-execute.ts']).toBeUndefined();
    expect(modes['step functions/steps/fetch-source.ts']).toBe('RW');
    expect(modes['step functions/steps/build-images.ts']).toBe('R');
  });
});

describe('image repository', () => {
  const repositories = resourcesOf(statefulTemplate, 'AWS::ECR::Repository');
  const repository = repositories[repositoryId];

  test('one repository in the stateful stack: scanned on push, MUTABLE tags, retained, no physical name', () => {
    expect(Object.keys(repositories)).toEqual([repositoryId]);
    expect(Object.keys(resourcesOf(template, 'AWS::ECR::Repository'))).toEqual([]);
    expect(repository.DeletionPolicy).toBe('Retain');
    expect(repository.Properties.RepositoryName).toBeUndefined();
    expect(repository.Properties.ImageScanningConfiguration).toEqual({ ScanOnPush: true });
    // A rebuild of an app at a commit re-points its tag; deployments use digests.
    expect(repository.Properties.ImageTagMutability).toBe('MUTABLE');
    const outputs = Object.values(statefulTemplate.toJSON().Outputs as Record<string, Json>);
    expect(outputs.some((o) => mentions(o.Value, repositoryId))).toBe(true);
  });

  test('expires untagged images after a day, keeps the newest 200 layer caches apart and the newest 1000 images', () => {
    const policy = JSON.parse(repository.Properties.LifecyclePolicy.LifecyclePolicyText);
    expect(policy.rules).toEqual([
      expect.objectContaining({
        rulePriority: 1,
        selection: {
          tagStatus: 'untagged',
          countType: 'sinceImagePushed',
          countUnit: 'days',
          countNumber: 1,
        },
        action: { type: 'expire' },
      }),
      // The layer caches (--cache-to …:buildcache-<scope>) are bounded by a rule of their own, before ANY.
      expect.objectContaining({
        rulePriority: 2,
        selection: {
          tagStatus: 'tagged',
          tagPrefixList: ['buildcache-'],
          countType: 'imageCountMoreThan',
          countNumber: 200,
        },
        action: { type: 'expire' },
      }),
      expect.objectContaining({
        rulePriority: 3,
        selection: { tagStatus: 'any', countType: 'imageCountMoreThan', countNumber: 1000 },
        action: { type: 'expire' },
      }),
    ]);
  });
});

describe('least privilege across the stateless stack', () => {
  const statements = Object.values(resourcesOf(template, 'AWS::IAM::Policy')).flatMap((p) =>
    asArray<Json>(p.Properties.PolicyDocument.Statement),
  );
  /** Calls without resource-level permissions, for which IAM requires Resource "*". */
  const resourceless = [
    /^xray:/,
    /^logs:(CreateLogDelivery|GetLogDelivery|UpdateLogDelivery|DeleteLogDelivery|ListLogDeliveries|PutResourcePolicy|DescribeResourcePolicies|DescribeLogGroups)$/,
    /^ecr:GetAuthorizationToken$/,
  ];

  test('no action has a wildcard', () => {
    const actions = statements.flatMap((s) => asArray<string>(s.Action));
    expect(actions.filter((a) => a.includes('*'))).toEqual([]);
  });

  test('Resource "*" only for calls that have no resource-level permissions', () => {
    const star = statements.filter((s) => asArray(s.Resource).includes('*'));
    const actions = star.flatMap((s) => asArray<string>(s.Action));
    expect(actions.filter((a) => !resourceless.some((pattern) => pattern.test(a)))).toEqual([]);
  });

  test('tables are granted with each index named, never index/*', () => {
    expect(JSON.stringify(statements)).not.toContain('/index/*');
  });

  test.each(declared)('%s may query every index of each table it reaches', (_, fn) => {
    for (const name of tableNames) {
      const tableId = stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);
      for (const statement of statementsOf(template, fn.id)) {
        if (!statement.resources.some((r) => mentions(r, tableId))) continue;
        // (minimizePolicies may merge tables granted the same actions into one statement.)
        const named = JSON.stringify(statement.resources);
        for (const index of tables[name].indexes) expect(named).toContain(`"/index/${index.name}"`);
      }
    }
  });

  test.each(declared)(
    '%s has its own role, no managed policy, and writes only its own log group',
    (_, fn) => {
      const roleId = functions[fn.id].Properties.Role['Fn::GetAtt'][0];
      expect(resources[roleId].Properties.ManagedPolicyArns).toBeUndefined();
      const logGroupId = functions[fn.id].Properties.LoggingConfig.LogGroup.Ref;
      const writes = statementsAbout(fn.id, (s) =>
        s.actions.some((a) => a === 'logs:PutLogEvents' || a === 'logs:CreateLogStream'),
      );
      expect(writes).toEqual([
        {
          actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
          resources: [{ 'Fn::GetAtt': [logGroupId, 'Arn'] }],
        },
      ]);
      // No other function shares the role.
      const sharing = Object.values(functions).filter((f) => f.Properties.Role['Fn::GetAtt'][0] === roleId);
      expect(sharing).toHaveLength(1);
    },
  );

  test('state machines invoke their step functions by unqualified ARN only (no versions or aliases)', () => {
    const invokes = statements.filter((s) => asArray<string>(s.Action).includes('lambda:InvokeFunction'));
    for (const s of invokes) {
      for (const r of asArray<Json>(s.Resource))
        expect(r).toEqual({ 'Fn::GetAtt': [expect.any(String), 'Arn'] });
    }
  });
});

describe('context settings', () => {
  const existing = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:preview/github-app-AbCdEf';
  const custom = synthesize({
    githubAppSecretArn: existing,
    githubApiUrl: 'https://github.example.com/api/v3',
    imageBuildArchitecture: 'arm64',
  });
  const customTemplate = custom.statelessTemplate;
  const fetchSource = logicalIdOf(custom.stateless.stepFunctions.get('functions/steps/fetch-source.ts')!);

  test('an existing GitHub App secret: no secret created, its ARN granted and passed', () => {
    expect(Object.keys(resourcesOf(custom.statefulTemplate, 'AWS::SecretsManager::Secret'))).toEqual([]);
    const reads = statementsOf(customTemplate, fetchSource).filter((s) =>
      s.actions.includes('secretsmanager:GetSecretValue'),
    );
    expect(reads.map((s) => s.resources)).toEqual([[existing]]);
    const env = resourcesOf(customTemplate, 'AWS::Lambda::Function')[fetchSource].Properties.Environment
      .Variables;
    expect(env.GITHUB_APP_SECRET_ARN).toBe(existing);
    expect(env.GITHUB_API_URL).toBe('https://github.example.com/api/v3');
  });

  test('arm64 image builds run on the ARM image', () => {
    const [project] = Object.values(resourcesOf(customTemplate, 'AWS::CodeBuild::Project'));
    expect(project.Properties.Environment).toEqual(
      expect.objectContaining({
        Type: 'ARM_CONTAINER',
        Image: 'aws/codebuild/amazonlinux-aarch64-standard:3.0',
        PrivilegedMode: true,
      }),
    );
  });

  test.each([
    [
      { githubAppSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:preview/github' },
      /complete secret ARN/,
    ],
    [{ githubApiUrl: 'http://github.example.com' }, /https URL/],
    [{ imageBuildArchitecture: 'x86' }, /imageBuildArchitecture/],
  ])('rejects %j', (context, message) => {
    expect(() => synthesize(context)).toThrow(message);
  });
});
