import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { Duration } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { type EventRuleId, eventRules, schedules } from '../../functions/manifest/events.js';
import { artifactKeys, type TableName, tableNames, tables } from '../../functions/manifest/tables.js';
import { workers } from '../../functions/manifest/workers.js';
import {
  artifactReadActions,
  artifactWriteActions,
  imageBuildActions,
  logReadActions,
  sourcesPrefix,
  tableWriteActions,
} from '../../lib/cdk/access.js';
import { eventDelivery, eventInvocation } from '../../lib/cdk/constructs/events.js';
import { imageBuildEnv } from '../../lib/cdk/constructs/image-build-project.js';
import { githubAppSecretPlaceholder, StatefulStack } from '../../lib/cdk/stateful-stack.js';
import { StatelessStack } from '../../lib/cdk/stateless-stack.js';
import { imageBuildWaitSeconds } from '../../lib/cdk/workflow-definitions.js';
import {
  asArray,
  declaredFunctions,
  grantsOf,
  type Json,
  logicalIdOf,
  mentions,
  resourcesOf,
  type Statement,
  statementsOf,
  synthesize,
  testApp,
} from './synth.js';

// Prepare: one synthesis with the defaults, one with every context setting changed.
const { stateful, stateless, statefulTemplate, statelessTemplate: template } = synthesize();
const resources = template.toJSON().Resources as Record<string, Json>;
const functions = resourcesOf(template, 'AWS::Lambda::Function');
const bucketId = logicalIdOf(stateless.artifacts);
const projectId = logicalIdOf(stateless.imageBuild.project);
const buildLogsId = logicalIdOf(stateless.imageBuild.logGroup);
const repositoryId = logicalIdOf(stateful.imageRepository);
const secretId = logicalIdOf(stateful.githubAppSecret);
const busId = logicalIdOf(stateless.eventBus);
const ruleIds = Object.keys(eventRules) as EventRuleId[];
const sorted = (values: string[]) => [...values].sort();

/** Every function of the stack with what its manifest entry (or entries, for a shared step) declares. */
const declared = declaredFunctions(stateless);
const envOf = (id: string): Record<string, Json> => functions[id].Properties.Environment.Variables;
const statementsAbout = (id: string, match: (s: Statement) => boolean) =>
  statementsOf(template, id)
    .filter(match)
    .map((s) => ({ actions: sorted(s.actions), resources: s.resources }));
/** A function's grants that match, one per resource (whatever minimizePolicies merged), actions sorted. */
const grantsAbout = (id: string, match: (s: Statement) => boolean) =>
  grantsOf(template, id)
    .filter(match)
    .map((s) => ({ actions: sorted(s.actions), resources: s.resources }));

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

describe('image build project', () => {
  const projects = resourcesOf(template, 'AWS::CodeBuild::Project');
  const project = projects[projectId].Properties;
  const buildSpec = JSON.parse(project.Source.BuildSpec);

  test('one project: no source, inline buildspec, no artifacts, no physical name', () => {
    expect(Object.keys(projects)).toEqual([projectId]);
    expect(project.Name).toBeUndefined();
    expect(project.Source.Type).toBe('NO_SOURCE');
    expect(project.Artifacts).toEqual({ Type: 'NO_ARTIFACTS' });
    expect(buildSpec.version).toBe('0.2');
  });

  test('x86_64 by default: Linux, standard 7.0, SMALL, privileged for docker build', () => {
    expect(project.Environment).toEqual(
      expect.objectContaining({
        Type: 'LINUX_CONTAINER',
        Image: 'aws/codebuild/standard:7.0',
        ComputeType: 'BUILD_GENERAL1_SMALL',
        PrivilegedMode: true,
      }),
    );
  });

  test('times out after 30 minutes (20 queued), well within the BuildImages task', () => {
    expect(project.TimeoutInMinutes).toBe(30);
    expect(project.QueuedTimeoutInMinutes).toBe(20);
    expect(imageBuildWaitSeconds()).toBe(3600);
    expect((30 + 20) * 60).toBeLessThanOrEqual(imageBuildWaitSeconds() - 5 * 60);
  });

  test('rejects build timeouts the BuildImages task would not wait for', () => {
    const app = testApp();
    const data = new StatefulStack(app, 'data');
    const props = {
      tables: data.tables,
      secretNamePrefix: 'preview/test',
      githubAppSecret: data.githubAppSecret,
      imageRepository: data.imageRepository,
    };
    expect(
      () => new StatelessStack(app, 'slow', { ...props, imageBuildTimeout: Duration.minutes(45) }),
    ).toThrow(/imageBuildTimeout \+ imageBuildQueuedTimeout/);
    expect(
      () => new StatelessStack(app, 'tooLong', { ...props, artifactsExpiration: Duration.hours(36) }),
    ).toThrow(/whole number of days/);
  });

  test('logs to its own log group, whose name the image-build functions get', () => {
    expect(project.LogsConfig.CloudWatchLogs).toEqual({ Status: 'ENABLED', GroupName: { Ref: buildLogsId } });
    expect(resources[buildLogsId].Properties.RetentionInDays).toBe(30);
  });

  test('never receives a task token: neither its environment nor its buildspec names one', () => {
    const names = project.Environment.EnvironmentVariables.map((v: Json) => v.Name);
    expect(sorted(names)).toEqual(sorted([imageBuildEnv.bucket, imageBuildEnv.repositoryUri]));
    expect(JSON.stringify(project)).not.toMatch(/token/i);
  });

  test('its role reads sources/* of the bucket, pushes to and pulls from the repository (images, layer cache) and writes logs; nothing else', () => {
    const roleId = project.ServiceRole['Fn::GetAtt'][0];
    const policies = Object.values(resourcesOf(template, 'AWS::IAM::Policy')).filter((p) =>
      asArray<Json>(p.Properties.Roles).some((r) => r.Ref === roleId),
    );
    const statements = policies.flatMap((p) => asArray<Json>(p.Properties.PolicyDocument.Statement));
    const push = [
      'ecr:BatchCheckLayerAvailability',
      // --cache-from: the layer cache is pulled back, from this repository only.
      'ecr:BatchGetImage',
      'ecr:GetDownloadUrlForLayer',
      'ecr:CompleteLayerUpload',
      'ecr:InitiateLayerUpload',
      'ecr:PutImage',
      'ecr:UploadLayerPart',
    ];
    const byAction = (prefix: string) =>
      statements.filter((s) => asArray<string>(s.Action).some((a) => a.startsWith(prefix)));
    expect(byAction('s3:').map((s) => [s.Action, s.Resource])).toEqual([
      ['s3:GetObject', { 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, `/${sourcesPrefix}*`]] }],
    ]);
    const ecr = byAction('ecr:');
    expect(sorted(ecr.flatMap((s) => asArray<string>(s.Action)))).toEqual(
      sorted([...push, 'ecr:GetAuthorizationToken']),
    );
    for (const s of ecr) {
      if (asArray<string>(s.Action).includes('ecr:GetAuthorizationToken')) {
        expect(s.Action).toBe('ecr:GetAuthorizationToken'); // the only call on Resource "*"
        expect(s.Resource).toBe('*');
      } else expect(mentions(s.Resource, repositoryId)).toBe(true);
    }
    const services = new Set(
      statements.flatMap((s) => asArray<string>(s.Action)).map((a) => a.split(':')[0] ?? ''),
    );
    expect(sorted([...services])).toEqual(['codebuild', 'ecr', 'logs', 's3']);
    for (const s of byAction('codebuild:')) expect(JSON.stringify(s.Resource)).toContain(':report-group/');
    const ownLogs = byAction('logs:').filter((s) => mentions(s.Resource, buildLogsId));
    expect(ownLogs.length).toBeGreaterThan(0);
  });

  test.each(declared)('%s starts and reads image builds exactly when it declares imageBuilds', (_, fn) => {
    const build = statementsAbout(
      fn.id,
      (s) =>
        s.actions.some((a) => a.startsWith('codebuild:') || a.startsWith('ecr:')) ||
        s.resources.some((r) => mentions(r, buildLogsId)),
    );
    const env = envOf(fn.id);
    if (!fn.access.imageBuilds && fn.access.logs) {
      // Reading logs: GetLogEvents on the build's log group (both ARN forms), no build, no image.
      expect(build).toEqual([{ actions: sorted(logReadActions), resources: expect.any(Array) }]);
      expect(build[0]!.resources).toHaveLength(2);
      for (const r of build[0]!.resources) expect(mentions(r, buildLogsId)).toBe(true);
      // Only the log group's name: nothing else of the image builds is read there.
      expect(env.IMAGE_BUILD_PROJECT).toBeUndefined();
      expect(env.IMAGE_REPOSITORY_URI).toBeUndefined();
      expect(env.IMAGE_BUILD_LOG_GROUP).toEqual({ Ref: buildLogsId });
      return;
    }
    if (!fn.access.imageBuilds) {
      expect(build).toEqual([]);
      for (const name of ['IMAGE_BUILD_PROJECT', 'IMAGE_REPOSITORY_URI', 'IMAGE_BUILD_LOG_GROUP']) {
        expect(env[name]).toBeUndefined();
      }
      return;
    }
    expect(build).toHaveLength(3);
    expect(build).toContainEqual({
      actions: sorted(imageBuildActions.project),
      resources: [{ 'Fn::GetAtt': [projectId, 'Arn'] }],
    });
    const ecr = build.find((s) => s.actions[0]?.startsWith('ecr:'));
    expect(ecr?.actions).toEqual(sorted(imageBuildActions.repository));
    expect(ecr?.resources).toHaveLength(1);
    expect(mentions(ecr?.resources, repositoryId)).toBe(true);
    // The group's ARN in both forms (`…:log-group:<name>:*` and `…:log-group:<name>`), nothing else.
    const logs = build.find((s) => s.actions[0]?.startsWith('logs:'));
    expect(logs?.actions).toEqual(sorted(imageBuildActions.logs));
    expect(logs?.resources).toHaveLength(2);
    expect(logs?.resources).toContainEqual({ 'Fn::GetAtt': [buildLogsId, 'Arn'] });
    for (const r of logs?.resources ?? []) expect(mentions(r, buildLogsId)).toBe(true);
    expect(env.IMAGE_BUILD_PROJECT).toEqual({ Ref: projectId });
    expect(mentions(env.IMAGE_REPOSITORY_URI, repositoryId)).toBe(true);
    expect(env.IMAGE_BUILD_LOG_GROUP).toEqual({ Ref: buildLogsId });
  });

  test('each phase runs a script file: CodeBuild echoes one short line per command, never a script', () => {
    for (const phase of Object.values(buildSpec.phases) as { commands: string[] }[])
      for (const command of phase.commands) {
        expect(command).not.toContain('\n');
        expect(command.length).toBeLessThan(200);
      }
    expect(buildSpec.phases.build.commands).toEqual(['bash "$PREVIEW_WORK_DIR/build.sh"']);
  });

  describe('buildspec (run with bash, aws and docker stubbed)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'buildspec-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    // A GitHub-style tarball: everything under one top-level folder.
    const top = join(dir, 'archive', 'owner-repo-abc123');
    for (const [path, text] of [
      ['Dockerfile', 'FROM scratch\n'],
      ['web/Dockerfile', 'FROM scratch\n'],
      ['api/docker/Dockerfile.dev', 'FROM scratch\n'],
    ] as const) {
      mkdirSync(join(top, path, '..'), { recursive: true });
      writeFileSync(join(top, path), text);
    }
    const archive = join(dir, 'source.tar.gz');
    spawnSync('tar', ['-czf', archive, '-C', join(dir, 'archive'), 'owner-repo-abc123']);
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    const stub = (name: string, body: string) => {
      writeFileSync(join(bin, name), `#!/usr/bin/env bash\necho "${name} $*" >> "$CALLS"\n${body}\n`);
      chmodSync(join(bin, name), 0o755);
    };
    stub(
      'aws',
      [
        // biome-ignore lint/suspicious/noTemplateCurlyInString: bash parameter expansion
        'if [ "$1 $2" = "s3 cp" ]; then cp "$FAKE_ARCHIVE" "${@: -1}"; fi',
        'if [ "$1 $2" = "ecr get-login-password" ]; then echo password; fi',
      ].join('\n'),
    );
    stub(
      'docker',
      [
        'if [ "$1" = login ]; then cat >/dev/null; fi',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: bash parameter expansion
        'if [ "$1 $2" = "buildx build" ] && [ -n "${FAIL_ON:-}" ] && [[ "$*" == *"$FAIL_ON"* ]]; then',
        '  echo "#6 [3/3] RUN npm ci"; echo "#6 1.20 npm error code E404"',
        '  echo \'#6 ERROR: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1\'',
        '  echo \'ERROR: failed to solve: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1\'',
        '  exit 1',
        'fi',
      ].join('\n'),
    );
    const uri = '123456789012.dkr.ecr.eu-west-1.amazonaws.com/preview-images';

    /** The phases in CodeBuild's order; a failing phase ends the build. */
    function run(builds: unknown, extra: Record<string, string> = {}, run = 'r') {
      const calls = join(dir, `${run}.calls`);
      writeFileSync(calls, '');
      let stdout = '';
      for (const phase of ['pre_build', 'build']) {
        const script = (buildSpec.phases[phase].commands as string[]).join('\n');
        const result = spawnSync('bash', ['-c', script], {
          encoding: 'utf8',
          env: {
            PATH: `${bin}:${process.env.PATH}`,
            ...buildSpec.env.variables,
            PREVIEW_WORK_DIR: join(dir, `${run}-work`),
            AWS_REGION: 'eu-west-1',
            SOURCE_BUCKET: 'artifacts-bucket',
            SOURCE_KEY: 'sources/org_1/owner/repo/abc123.tar.gz',
            IMAGE_REPOSITORY_URI: uri,
            BUILDS: typeof builds === 'string' ? builds : JSON.stringify(builds),
            CALLS: calls,
            FAKE_ARCHIVE: archive,
            ...extra,
          },
        });
        stdout += result.stdout;
        if (result.status !== 0) {
          return { status: result.status, stdout, calls: readLines(calls), phase };
        }
      }
      return { status: 0, stdout, calls: readLines(calls), phase: 'done' };
    }
    const readLines = (path: string) =>
      spawnSync('cat', [path], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
    const commit = 'c'.repeat(40);
    const apps = [
      {
        app: 'web',
        dockerfile: 'Dockerfile',
        context: 'web',
        tag: 'aaaa-abc123',
        commit,
        cache: 'buildcache-aaaa',
      },
      {
        app: 'api',
        dockerfile: 'docker/Dockerfile.dev',
        context: 'api',
        tag: 'bbbb-abc123',
        commit,
        buildArgs: { LEVEL: '2', NOTE: 'two words' },
        cache: 'buildcache-bbbb',
      },
      { app: 'root', tag: 'cccc-abc123' },
    ];
    /** `docker buildx build` of one app as the buildspec runs it (BuildKit, the app's registry layer cache). */
    const buildx = (
      dockerfile: string,
      tag: string,
      cache: string,
      context: string,
      args = '',
      rev = commit,
    ) =>
      `docker buildx build --builder preview --progress plain -f ${dockerfile} ${args}` +
      `--annotation manifest:org.opencontainers.image.revision=${rev} --provenance=false ` +
      `--cache-from type=registry,ref=${uri}:${cache} ` +
      `--cache-to type=registry,ref=${uri}:${cache},mode=max,image-manifest=true,oci-mediatypes=true ` +
      `--output type=image,name=${uri}:${tag},push=true,oci-mediatypes=true ${context}`;

    test('downloads the archive, logs in, starts BuildKit, then builds and pushes each app in order with its layer cache', () => {
      const result = run(apps, {}, 'ok');
      expect(result.status).toBe(0);
      // The two ends of the login pipe run at once, so they may be recorded in either order.
      expect(sorted(result.calls.slice(1, 3))).toEqual([
        'aws ecr get-login-password --region eu-west-1',
        'docker login --username AWS --password-stdin 123456789012.dkr.ecr.eu-west-1.amazonaws.com',
      ]);
      expect([...result.calls.slice(0, 1), ...result.calls.slice(3)]).toEqual([
        expect.stringMatching(
          /^aws s3 cp .*s3:\/\/artifacts-bucket\/sources\/org_1\/owner\/repo\/abc123\.tar\.gz /,
        ),
        'docker buildx create --name preview --driver docker-container --driver-opt image=moby/buildkit:v0.13.2 --use',
        buildx('web/Dockerfile', 'aaaa-abc123', 'buildcache-aaaa', 'web'),
        buildx(
          'api/docker/Dockerfile.dev',
          'bbbb-abc123',
          'buildcache-bbbb',
          'api',
          '--build-arg=LEVEL=2 --build-arg=NOTE=two words ',
        ),
        buildx('./Dockerfile', 'cccc-abc123', 'buildcache-root', '.', '', ''),
      ]);
    });

    test('stops at the first failing build, its last line naming the app', () => {
      const result = run(apps, { FAIL_ON: 'api/docker' }, 'fail');
      expect(result.status).not.toBe(0);
      expect(result.phase).toBe('build');
      expect(result.stdout.trim().split('\n').at(-1)).toBe(
        'PREVIEW-BUILD-FAILED app=api: docker buildx build of api/docker/Dockerfile.dev failed: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1',
      );
      // Its output reached the log as it came, before the verdict.
      expect(result.stdout).toContain('#6 1.20 npm error code E404\n');
      expect(result.calls.filter((c) => c.startsWith('docker buildx build'))).toEqual([
        buildx('web/Dockerfile', 'aaaa-abc123', 'buildcache-aaaa', 'web'),
        expect.stringContaining('api/docker/Dockerfile.dev'),
      ]);
      expect(result.calls.some((c) => c.includes('cccc-abc123'))).toBe(false);
    });

    test('names the app whose Dockerfile is missing', () => {
      const result = run(
        [{ app: 'worker', dockerfile: 'Dockerfile', context: 'worker', tag: 't1' }],
        {},
        'nf',
      );
      expect(result.stdout.trim().split('\n').at(-1)).toBe(
        'PREVIEW-BUILD-FAILED app=worker: no Dockerfile at worker/Dockerfile',
      );
      expect(result.calls.some((c) => c.startsWith('docker buildx build'))).toBe(false);
    });

    test('refuses a BUILDS that is not a list of builds, before downloading anything', () => {
      const result = run('{"app":"web"}', {}, 'bad');
      expect(result.phase).toBe('pre_build');
      expect(result.stdout).toMatch(/PREVIEW-BUILD-FAILED app=-: BUILDS is not a non-empty JSON array/);
      expect(result.calls).toEqual([]);
    });
  });
});

describe('event rules', () => {
  const rules = resourcesOf(template, 'AWS::Events::Rule');
  const queues = resourcesOf(template, 'AWS::SQS::Queue');

  test('one rule per manifest entry and schedule; the only queues are two per rule and schedule, one per worker', () => {
    expect(sorted(Object.keys(rules))).toEqual(
      sorted([
        ...ruleIds.map((r) => logicalIdOf(stateless.eventRules[r].rule)),
        ...Object.values(stateless.schedules).map((s) => logicalIdOf(s.rule)),
      ]),
    );
    expect(Object.keys(queues)).toHaveLength(
      2 * ruleIds.length + 2 * Object.keys(schedules).length + Object.keys(workers).length,
    );
  });

  describe.each(ruleIds)('%s', (ruleId) => {
    const built = stateless.eventRules[ruleId];
    const def = eventRules[ruleId];
    const ruleId_ = logicalIdOf(built.rule);
    const fnId = logicalIdOf(built.function);
    const deliveryId = logicalIdOf(built.deliveryDlq);
    const failureId = logicalIdOf(built.failureDlq);
    const rule = rules[ruleId_].Properties;

    test(`matches the manifest pattern on the ${def.bus} bus (narrowed to the stack’s own build project where declared)`, () => {
      // The default bus for AWS service events; the service's own bus for GitHub and custom events.
      if (def.bus === 'service') expect(rule.EventBusName).toEqual({ Ref: busId });
      else expect(rule.EventBusName).toBeUndefined();
      expect(rule.State).toBe('ENABLED');
      const detail = {
        ...def.pattern.detail,
        ...(def.ownImageBuildProject ? { 'project-name': [{ Ref: projectId }] } : {}),
      };
      expect(rule.EventPattern).toEqual({
        source: def.pattern.source,
        'detail-type': def.pattern['detail-type'],
        ...(Object.keys(detail).length > 0 ? { detail } : {}),
      });
    });

    test('targets its function with a retry policy and a dead-letter queue for failed deliveries', () => {
      expect(rule.Targets).toEqual([
        expect.objectContaining({
          Arn: { 'Fn::GetAtt': [fnId, 'Arn'] },
          RetryPolicy: {
            MaximumRetryAttempts: eventDelivery.retryAttempts,
            MaximumEventAgeInSeconds: eventDelivery.maxEventAge.toSeconds(),
          },
          DeadLetterConfig: { Arn: { 'Fn::GetAtt': [deliveryId, 'Arn'] } },
        }),
      ]);
      const permissions = Object.values(resourcesOf(template, 'AWS::Lambda::Permission')).filter((p) =>
        mentions(p.Properties.FunctionName, fnId),
      );
      expect(permissions.map((p) => p.Properties)).toEqual([
        expect.objectContaining({
          Action: 'lambda:InvokeFunction',
          Principal: 'events.amazonaws.com',
          SourceArn: { 'Fn::GetAtt': [ruleId_, 'Arn'] },
        }),
      ]);
      // Only this rule may send to the delivery DLQ (and only over TLS).
      const policy = Object.values(resourcesOf(template, 'AWS::SQS::QueuePolicy')).find((p) =>
        asArray<Json>(p.Properties.Queues).some((q) => q.Ref === deliveryId),
      );
      const statements = asArray<Json>(policy?.Properties.PolicyDocument.Statement);
      expect(statements.filter((s) => s.Effect === 'Allow')).toEqual([
        expect.objectContaining({
          Action: 'sqs:SendMessage',
          Principal: { Service: 'events.amazonaws.com' },
          Condition: { ArnEquals: { 'aws:SourceArn': { 'Fn::GetAtt': [ruleId_, 'Arn'] } } },
        }),
      ]);
    });

    test('its function retries twice, then sends a failed event to its on-failure queue', () => {
      const configs = Object.values(resourcesOf(template, 'AWS::Lambda::EventInvokeConfig')).filter(
        (c) => c.Properties.FunctionName.Ref === fnId,
      );
      expect(configs.map((c) => c.Properties)).toEqual([
        {
          FunctionName: { Ref: fnId },
          Qualifier: '$LATEST',
          MaximumRetryAttempts: eventInvocation.retryAttempts,
          MaximumEventAgeInSeconds: eventInvocation.maxEventAge.toSeconds(),
          DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [failureId, 'Arn'] } } },
        },
      ]);
      expect(eventInvocation.retryAttempts).toBe(2);
      const sends = statementsAbout(fnId, (s) => s.actions.some((a) => a.startsWith('sqs:')));
      expect(sends).toHaveLength(1);
      expect(sends[0]?.actions).toContain('sqs:SendMessage');
      expect(sends[0]?.resources).toEqual([{ 'Fn::GetAtt': [failureId, 'Arn'] }]);
    });

    test('both queues are distinct, encrypted, TLS-only and keep messages 14 days', () => {
      expect(deliveryId).not.toBe(failureId);
      for (const id of [deliveryId, failureId]) {
        expect(queues[id].Properties).toEqual(
          expect.objectContaining({ SqsManagedSseEnabled: true, MessageRetentionPeriod: 14 * 24 * 3600 }),
        );
        const policy = Object.values(resourcesOf(template, 'AWS::SQS::QueuePolicy')).find((p) =>
          asArray<Json>(p.Properties.Queues).some((q) => q.Ref === id),
        );
        expect(asArray<Json>(policy?.Properties.PolicyDocument.Statement)).toContainEqual(
          expect.objectContaining({
            Effect: 'Deny',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
        );
      }
      const outputs = Object.values(template.toJSON().Outputs as Record<string, Json>).map((o) => o.Value);
      expect(outputs).toContainEqual({ Ref: deliveryId });
      expect(outputs).toContainEqual({ Ref: failureId });
    });

    test('its function runs for at most a minute and reaches its declared tables', () => {
      expect(functions[fnId].Properties.Timeout).toBe(60);
      const declaredTables = def.target.access.tables as Partial<Record<TableName, 'R' | 'RW'>>;
      for (const [name, mode] of Object.entries(declaredTables) as [TableName, 'R' | 'RW'][]) {
        const tableId = stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);
        const actions = statementsOf(template, fnId)
          .filter((s) => s.resources.some((r) => mentions(r, tableId)))
          .flatMap((s) => s.actions);
        expect(actions.some((a) => tableWriteActions.includes(a))).toBe(mode === 'RW');
      }
    });
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
