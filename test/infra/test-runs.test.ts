import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { mediaKeys } from '../../functions/core/runs/store.js';
import { workflows } from '../../functions/manifest/workflows.js';
import { LAMBDA_FFMPEG_PATH } from '../../functions/ports/browser/lambda-chromium.js';
import { parseConfig } from '../../functions/shared/config.js';
import {
  browserRequirements,
  mediaPrefix,
  mediaReadActions,
  mediaWriteActions,
  stateMachineArnEnv,
} from '../../lib/cdk/access.js';
import { copyModulesHooks, moduleClosure, repoRoot } from '../../lib/cdk/bundling.js';
import { FFMPEG_PACKAGE, ffmpegLayer, ffmpegPath } from '../../lib/cdk/constructs/ffmpeg-layer.js';
import { ServiceFunction } from '../../lib/cdk/constructs/service-function.js';
import { StatefulStack } from '../../lib/cdk/stateful-stack.js';
import { StatelessStack } from '../../lib/cdk/stateless-stack.js';
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

// Prepare: one synthesis with the defaults.
const { stateless, statelessTemplate: template } = synthesize();
const functions = resourcesOf(template, 'AWS::Lambda::Function');
const idIn = (construct: { node: { defaultChild?: unknown } }) => logicalIdOf(construct);
const mediaId = idIn(stateless.media);
const linkSecretId = idIn(stateless.runLinkSecret);
const testRunId = idIn(stateless.stateMachines.testRun);
const declared = declaredFunctions(stateless);
const envOf = (id: string): Record<string, Json> => functions[id].Properties.Environment.Variables;
const outputValues = () =>
  Object.values(template.toJSON().Outputs as Record<string, Json>).map((o) => o.Value);
const sorted = (values: string[]) => [...values].sort();
const shape = (statements: Statement[]) =>
  statements.map((s) => ({ actions: sorted(s.actions), resources: s.resources }));
const executor = declared.find(([label]) => label === 'step functions/steps/run-execute.ts')![1];
const scratch = mkdtempSync(join(tmpdir(), 'infra-test-runs-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A StatelessStack of its own, with some props changed (for the props' defaults and checks). */
function statelessWith(props: Partial<ConstructorParameters<typeof StatelessStack>[2]>, id = 'custom') {
  const app = testApp();
  const data = new StatefulStack(app, 'data');
  return new StatelessStack(app, id, {
    tables: data.tables,
    secretNamePrefix: 'preview/test',
    githubAppSecret: data.githubAppSecret,
    imageRepository: data.imageRepository,
    ...props,
  });
}

describe('the testRun state machine', () => {
  test('exists and is started exactly by the functions that declare it, which know its ARN', () => {
    expect(Object.keys(workflows)).toContain('testRun');
    const starters = declared.filter(([, fn]) =>
      statementsOf(template, fn.id).some(
        (s) => s.actions.includes('states:StartExecution') && s.resources.some((r) => mentions(r, testRunId)),
      ),
    );
    const declaring = declared.filter(([, fn]) => fn.access.starts?.includes('testRun'));
    expect(sorted(starters.map(([label]) => label))).toEqual(sorted(declaring.map(([label]) => label)));
    expect(declaring.map(([label]) => label)).toContain('route startRun');
    for (const [, fn] of declared) {
      expect(envOf(fn.id)[stateMachineArnEnv.testRun]).toEqual(
        fn.access.starts?.includes('testRun') ? { Ref: testRunId } : undefined,
      );
    }
    expect(stateMachineArnEnv.testRun).toBe('STATE_MACHINE_TEST_RUN_ARN');
    expect(outputValues()).toContainEqual({ Ref: testRunId });
  });
});

describe('the browser function (run executor)', () => {
  const props = functions[executor.id].Properties;

  test('is exactly the functions declaring browser access', () => {
    const x86 = Object.entries(functions)
      .filter(([, fn]) => fn.Properties.Architectures?.[0] === 'x86_64')
      .map(([id]) => id);
    expect(sorted(x86)).toEqual(
      sorted(declared.filter(([, fn]) => fn.access.browser).map(([, fn]) => fn.id)),
    );
    expect(x86).toContain(executor.id);
  });

  test('runs on x86_64 with at least 2 GB of memory and 2 GB of /tmp', () => {
    expect(props.Architectures).toEqual(['x86_64']);
    expect(props.MemorySize).toBe(2048);
    expect(props.MemorySize).toBeGreaterThanOrEqual(browserRequirements.minMemorySize);
    expect(props.EphemeralStorage).toEqual({ Size: 2048 });
  });

  test('outlives the longest run (840 s) and stops 10 s before its Task state times out (900 s)', () => {
    // config.ts caps PREVIEW_RUN_TIMEOUT_SECONDS at 840; the Execute state's TimeoutSeconds is 900.
    expect(props.Timeout).toBe(890);
    expect(props.Timeout).toBeGreaterThan(840);
  });

  test('finds ffmpeg where the layer puts it: the packaged layer by default, on the executor only', () => {
    expect(ffmpegPath).toBe(LAMBDA_FFMPEG_PATH);
    expect(envOf(executor.id).PREVIEW_FFMPEG_PATH).toBe(LAMBDA_FFMPEG_PATH);
    const layers = template.findResources('AWS::Lambda::LayerVersion', {
      Properties: { Description: Match.stringLikeRegexp(FFMPEG_PACKAGE) },
    });
    expect(Object.keys(layers)).toHaveLength(1);
    expect(props.Layers).toEqual([{ Ref: Object.keys(layers)[0] }]);
    for (const [, fn] of declared.filter(([, f]) => !f.access.browser)) {
      expect(envOf(fn.id).PREVIEW_FFMPEG_PATH).toBeUndefined();
    }
  });

  test("the operator's ffmpeg layer replaces the packaged one", () => {
    const arn = 'arn:aws:lambda:eu-west-1:123456789012:layer:ffmpeg:3';
    const t = Template.fromStack(statelessWith({ ffmpegLayerArn: arn }));
    expect(
      Object.keys(
        t.findResources('AWS::Lambda::LayerVersion', {
          Properties: { Description: Match.stringLikeRegexp(FFMPEG_PACKAGE) },
        }),
      ),
    ).toHaveLength(0);
    const withLayer = Object.values(t.findResources('AWS::Lambda::Function')).filter((r) =>
      JSON.stringify(r.Properties.Layers ?? []).includes(arn),
    );
    expect(withLayer).toHaveLength(1);
  });

  test('the packaged layer holds an x86_64 ffmpeg at bin/ffmpeg that encodes H.264 (libx264)', () => {
    // Prepare: a stack with bundling on (the infra tests skip it), so the asset is built as at deploy.
    const outdir = join(scratch, 'ffmpeg-out');
    const app = new App({ outdir });
    ffmpegLayer(new Stack(app, 'Ffmpeg'), {});
    // Act
    const assembly = app.synth();
    const staged = readdirSync(assembly.directory).filter((d) => d.startsWith('asset.'));
    const binary = join(assembly.directory, staged[0]!, 'bin', 'ffmpeg');
    const encoders = spawnSync(binary, ['-hide_banner', '-encoders'], { encoding: 'utf8' });
    // Assess
    expect(staged).toHaveLength(1);
    expect(statSync(binary).mode & 0o111).toBeTruthy();
    expect(encoders.status).toBe(0);
    expect(encoders.stdout).toMatch(/libx264/);
  });

  test('its environment is what config.ts reads for a test run', () => {
    const env = Object.fromEntries(
      Object.entries(envOf(executor.id)).map(([k, v]) => [k, typeof v === 'string' ? v : `resolved:${k}`]),
    );
    const config = parseConfig({ ...env, AWS_REGION: 'eu-west-1' });
    // It stores media (media: 'W') and, for the merge gate's links (gateLinks), signs report links.
    expect(config.runs).toEqual(
      expect.objectContaining({
        mediaBucket: 'resolved:MEDIA_BUCKET',
        linkSecretArn: 'resolved:RUN_LINK_SECRET_ARN',
        ffmpegPath: '/opt/bin/ffmpeg',
      }),
    );
  });

  test('outputs its name', () => {
    expect(outputValues()).toContainEqual({ Ref: executor.id });
  });

  test('ships @sparticuz/chromium and every package it needs beside the bundle, and it loads from there', () => {
    // Prepare
    const dirs = moduleClosure(browserRequirements.modules);
    const out = join(scratch, 'bundle');
    mkdirSync(out);
    // Act: the bundling hook's commands, as CDK runs them after esbuild.
    for (const command of copyModulesHooks(dirs).afterBundling(repoRoot, out)) {
      const result = spawnSync('bash', ['-c', command], { encoding: 'utf8' });
      expect({ command, status: result.status, stderr: result.stderr }).toEqual({
        command,
        status: 0,
        stderr: '',
      });
    }
    writeFileSync(
      join(out, 'index.mjs'),
      "const { default: c } = await import('@sparticuz/chromium'); console.log(typeof c.executablePath);",
    );
    const loaded = spawnSync(process.execPath, [join(out, 'index.mjs')], { encoding: 'utf8', cwd: out });
    // Assess
    expect(dirs).toEqual(expect.arrayContaining(['node_modules/@sparticuz/chromium', 'node_modules/tar-fs']));
    expect({ status: loaded.status, stdout: loaded.stdout.trim(), stderr: loaded.stderr }).toEqual({
      status: 0,
      stdout: 'function',
      stderr: '',
    });
  });

  test('a function not built for the browser refuses browser access', () => {
    const app = testApp();
    const tables = new StatefulStack(app, 'refusesData').tables;
    const stack = new Stack(app, 'refuses');
    const fn = new ServiceFunction(stack, 'Plain', {
      entry: 'functions/steps/run-execute.ts',
      kind: 'step',
      tables,
      secretNamePrefix: 'preview/test',
    });
    expect(() =>
      fn.bindAccess({ tables: {}, browser: true }, { tables, browser: { ffmpegPath: LAMBDA_FFMPEG_PATH } }),
    ).toThrow(/x86_64 function with at least 2048 MB/);
  });

  test('browserMemorySize and the ffmpeg layer settings are checked', () => {
    expect(() => statelessWith({ browserMemorySize: 1024 })).toThrow(/browserMemorySize/);
    expect(() =>
      statelessWith({ ffmpegLayerArn: 'arn:aws:lambda:eu-west-1:123456789012:function:x' }),
    ).toThrow(/layer version ARN/);
    expect(() => statelessWith({ ffmpegLayerPath: scratch })).toThrow(/bin\/ffmpeg/);
    expect(() =>
      statelessWith({
        ffmpegLayerPath: scratch,
        ffmpegLayerArn: 'arn:aws:lambda:eu-west-1:123456789012:layer:ffmpeg:3',
      }),
    ).toThrow(/exclusive/);
  });
});

describe('the ffmpeg layer', () => {
  test('an existing layer (ffmpegLayerArn context) is attached to the browser function only', () => {
    const arn = 'arn:aws:lambda:eu-west-1:123456789012:layer:ffmpeg:7';
    const s = synthesize({ ffmpegLayerArn: arn });
    const fns = resourcesOf(s.statelessTemplate, 'AWS::Lambda::Function');
    // (The shared Kubernetes layer of the cluster callers is test/infra/layers.test.ts's.)
    const withLayers = Object.entries(fns).filter(([, fn]) => fn.Properties.Layers?.includes(arn));
    expect(withLayers.map(([, fn]) => [fn.Properties.Architectures, fn.Properties.Layers])).toEqual([
      [['x86_64'], [arn]],
    ]);
  });

  test('a local directory with bin/ffmpeg (ffmpegLayerPath) becomes an x86_64 layer of the stack', () => {
    const dir = join(scratch, 'ffmpeg-layer');
    mkdirSync(join(dir, 'bin'), { recursive: true });
    writeFileSync(join(dir, 'bin', 'ffmpeg'), '#!/bin/sh\n');
    const s = statelessWith({ ffmpegLayerPath: dir }, 'withLayer');
    const t = synthesizeStack(s);
    // (The shared Kubernetes layer of the cluster callers is test/infra/layers.test.ts's.)
    const layers = Object.entries(resourcesOf(t, 'AWS::Lambda::LayerVersion')).filter(([, l]) =>
      String(l.Properties.Description).startsWith('ffmpeg '),
    );
    expect(layers).toHaveLength(1);
    const [layerId, layer] = layers[0]!;
    expect(layer.Properties.CompatibleArchitectures).toEqual(['x86_64']);
    const withLayers = Object.values(resourcesOf(t, 'AWS::Lambda::Function')).filter((fn) =>
      fn.Properties.Layers?.some((ref: { Ref?: string }) => ref.Ref === layerId),
    );
    expect(withLayers.map((fn) => fn.Properties.Layers)).toEqual([[{ Ref: layerId }]]);
  });
});

describe('the media bucket', () => {
  const bucket = resourcesOf(template, 'AWS::S3::Bucket')[mediaId];
  const objectsArn = { 'Fn::Join': ['', [{ 'Fn::GetAtt': [mediaId, 'Arn'] }, `/${mediaPrefix}*`]] };

  test('private, encrypted (SSE-S3), unversioned, retained, no physical name, and output', () => {
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
    expect(outputValues()).toContainEqual({ Ref: mediaId });
  });

  test('expires every object after 30 days and aborts incomplete uploads after a day', () => {
    expect(bucket.Properties.LifecycleConfiguration.Rules).toEqual([
      expect.objectContaining({
        Status: 'Enabled',
        ExpirationInDays: 30,
        AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
      }),
    ]);
  });

  test('its policy only denies: plain HTTP and TLS below 1.2', () => {
    const policy = Object.values(resourcesOf(template, 'AWS::S3::BucketPolicy')).find(
      (p) => p.Properties.Bucket.Ref === mediaId,
    );
    const statements = asArray<Json>(policy?.Properties.PolicyDocument.Statement);
    expect(statements.length).toBeGreaterThan(0);
    expect(statements.every((s) => s.Effect === 'Deny')).toBe(true);
    expect(statements).toContainEqual(
      expect.objectContaining({ Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    );
    expect(statements).toContainEqual(
      expect.objectContaining({ Condition: { NumericLessThan: { 's3:TlsVersion': 1.2 } } }),
    );
  });

  test('mediaExpiration sets the expiry, in whole days', () => {
    const s = statelessWith({ mediaExpiration: Duration.days(10) });
    const [media] = Object.values(resourcesOf(synthesizeStack(s), 'AWS::S3::Bucket')).filter(
      (b) => b.Properties.LifecycleConfiguration.Rules[0].Id === 'expire-run-media',
    );
    expect(media.Properties.LifecycleConfiguration.Rules[0].ExpirationInDays).toBe(10);
    expect(() => statelessWith({ mediaExpiration: Duration.hours(36) }, 'bad')).toThrow(
      /whole number of days/,
    );
  });

  test('every media key is under the prefix the grants name', () => {
    const run = { orgId: 'org_1', runId: 'run_1' };
    expect(mediaKeys.step(run, 0, 'step_1').startsWith(mediaPrefix)).toBe(true);
    expect(mediaKeys.video(run, 'mp4').startsWith(mediaPrefix)).toBe(true);
  });

  test.each(declared)('%s reaches media and the link secret exactly as declared', (_, fn) => {
    const media = shape(grantsOf(template, fn.id).filter((s) => mentions(s.resources, mediaId)));
    const secret = shape(grantsOf(template, fn.id).filter((s) => mentions(s.resources, linkSecretId)));
    const env = envOf(fn.id);
    // Media exactly as `media` declares; gateLinks (the merge gate's report links, a failed step's
    // screenshot at the report's anchor) adds the link secret and no media.
    const mode = fn.access.media;
    const reads = mode === 'R' || mode === 'RW';
    const signs = reads || fn.access.gateLinks === true;
    expect(media).toEqual(
      mode
        ? [
            {
              actions: sorted([
                ...(reads ? mediaReadActions : []),
                ...(mode !== 'R' ? mediaWriteActions : []),
              ]),
              resources: [objectsArn],
            },
          ]
        : [],
    );
    // Only a function that mints URLs or links reads the link secret (a writer signs nothing).
    expect(secret).toEqual(
      signs
        ? [
            {
              actions: ['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue'],
              resources: [{ Ref: linkSecretId }],
            },
          ]
        : [],
    );
    expect(env.MEDIA_BUCKET).toEqual(mode ? { Ref: mediaId } : undefined);
    expect(env.RUN_LINK_SECRET_ARN).toEqual(signs ? { Ref: linkSecretId } : undefined);
  });

  test('the executor only stores media (W); the run routes only mint URLs and links (R)', () => {
    const modes = Object.fromEntries(declared.map(([label, fn]) => [label, fn.access.media]));
    expect(modes['step functions/steps/run-execute.ts']).toBe('W');
    for (const route of ['startRun', 'listRuns', 'getRun']) expect(modes[`route ${route}`]).toBe('R');
  });
});

describe('the run-link secret', () => {
  const secret = resourcesOf(template, 'AWS::SecretsManager::Secret')[linkSecretId];

  test('is generated by Secrets Manager (never in the template), long, retained, and output', () => {
    expect(secret.Properties.SecretString).toBeUndefined();
    expect(secret.Properties.GenerateSecretString.PasswordLength).toBeGreaterThanOrEqual(32);
    expect(secret.Properties.Name).toBeUndefined();
    expect(secret.DeletionPolicy).toBe('Retain');
    expect(outputValues()).toContainEqual({ Ref: linkSecretId });
  });

  test('nobody may write, rotate or delete it', () => {
    for (const [, fn] of declared) {
      const actions = statementsOf(template, fn.id)
        .filter((s) => s.resources.some((r) => mentions(r, linkSecretId)))
        .flatMap((s) => s.actions);
      expect(
        actions.filter(
          (a) => !['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret'].includes(a),
        ),
      ).toEqual([]);
    }
  });
});

/** The template of a stack built by `statelessWith`. */
const synthesizeStack = (stack: Stack) => Template.fromStack(stack);

describe('the run report page', () => {
  test('GET /report/{run_id} is served by its own function, with no authorizer (the signed link is the authorization)', () => {
    const methods = template.findResources('AWS::ApiGateway::Method', {
      Properties: { HttpMethod: 'GET', AuthorizationType: 'NONE' },
    });
    const resources = template.findResources('AWS::ApiGateway::Resource', {
      Properties: { PathPart: '{run_id}' },
    });
    const reportResource = Object.entries(resources).find(([, r]) =>
      JSON.stringify(r.Properties.ParentId).includes('report'),
    );
    expect(reportResource).toBeDefined();
    const onReport = Object.values(methods).filter((m) =>
      JSON.stringify(m.Properties.ResourceId).includes(reportResource![0]),
    );
    expect(onReport).toHaveLength(1);
    const fns = template.findResources('AWS::Lambda::Function', {
      Properties: { Description: 'GET /report/{run_id}' },
    });
    expect(Object.keys(fns)).toHaveLength(1);
  });
});
