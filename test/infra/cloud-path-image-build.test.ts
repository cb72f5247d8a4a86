import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { Duration } from 'aws-cdk-lib';
import { imageBuildActions, logReadActions, sourcesPrefix } from '../../lib/cdk/access.js';
import { imageBuildEnv } from '../../lib/cdk/constructs/image-build-project.js';
import { StatefulStack } from '../../lib/cdk/stateful-stack.js';
import { StatelessStack } from '../../lib/cdk/stateless-stack.js';
import { imageBuildWaitSeconds } from '../../lib/cdk/workflow-definitions.js';
import {
  bucketId,
  buildLogsId,
  declared,
  envOf,
  projectId,
  repositoryId,
  resources,
  sorted,
  statementsAbout,
  template,
} from './cloud-path-stack.js';
import { asArray, type Json, mentions, resourcesOf, testApp } from './synth.js';

// The cloud path's image build: the CodeBuild project, its role, who may start it, and its buildspec run.

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
