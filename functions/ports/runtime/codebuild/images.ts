import { createHash } from 'node:crypto';
import { type CloudWatchLogsClient, GetLogEventsCommand } from '@aws-sdk/client-cloudwatch-logs';
import { type CodeBuildClient, StartBuildCommand } from '@aws-sdk/client-codebuild';
import { BatchGetImageCommand, type ECRClient } from '@aws-sdk/client-ecr';
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { artifactKeys, keys, repoKey } from '../../../manifest/tables.js';
import { ddb, isConditionFailure, table } from '../../../shared/aws/dynamo.js';
import { newId } from '../../../shared/crypto.js';
import { ConfigError } from '../../../shared/errors.js';
import { log } from '../../../shared/log.js';
import { maskSecrets } from '../../../shared/masking/mask.js';
import { Superseded } from '../../../shared/step-errors.js';
import type { TaskOutcome } from '../../workflows/port.js';
import { buildIdentity } from '../build-identity.js';
import { leadingCause, logsCommand } from '../log-cause.js';
import type {
  AppLogs,
  AppSpec,
  BuildOptions,
  BuildResult,
  ImageBuilder,
  LogQuery,
  LogTarget,
  LogText,
  RuntimeTarget,
} from '../port.js';
import { BuildLogs, isCodeBuildLine, type LogPointer } from './build-logs.js';
import { BUILD_CACHE_TAG_PREFIX, IMAGE_BUILDER_VERSION, REVISION_ANNOTATION } from './builder.js';

/** The env var through which a build names itself (echoed by CodeBuild's events; not a secret). */
export const BUILD_REF_VAR = 'PREVIEW_BUILD_REF';
/** How long a build's record is kept if no completion ever arrives (CodeBuild's own limit is 8 h). */
const RECORD_TTL_SECONDS = 24 * 3600;
/** How many of a failed build's last log events are searched for its cause. */
const CAUSE_SEARCH_LINES = 300;
/** How long the pointer to an app's latest build log is kept (the log group's retention: a month). */
const LOG_POINTER_TTL_SECONDS = 31 * 24 * 3600;

/** The clients are the container's SDK clients of each service (registry/aws-clients.ts). */
export interface CodeBuildImagesOptions {
  /** Starts the builds (`build`); a handler that only ends them (`onBuildFinished`) goes without. */
  codebuild?: CodeBuildClient;
  ecr: ECRClient;
  /** Reads the build logs (`logs`, `onBuildFinished`); the BuildImages step goes without. */
  logs?: CloudWatchLogsClient;
  /** The image-build project (CDK: the stack's project). */
  project: string;
  /** `<account>.dkr.ecr.<region>.amazonaws.com/<name>`: every app image is a tag of this repository. */
  repositoryUri: string;
  /**
   * The bucket source archives are staged in (FetchSource put them there): what a build downloads. Only
   * `build` needs it; the handler of completion events goes without (its function is not given it).
   */
  artifactsBucket?: string;
  /** Ends a callback task (`Workflows.completeTask`). */
  complete: (token: string, outcome: TaskOutcome) => Promise<void>;
  /**
   * The project's log group (IMAGE_BUILD_LOG_GROUP): a build's log can be read while it runs. Without it,
   * once the build's completion event has named it.
   */
  logGroup?: string;
}

/** A build record (table `builds`): what the completion event needs, keyed by the build's own name. */
interface BuildRecord {
  buildId: string;
  taskToken: string;
  orgId: string;
  envKey: string;
  generation: number;
  /** App → image tag being built. */
  tags: Record<string, string>;
  /** Images reused rather than built: app → `uri@digest`. */
  reused: Record<string, string>;
  /** The commit being built (records written before it lack it). */
  sha?: string;
  /** The reused images' commits (app → commit). */
  reusedFrom?: Record<string, string>;
  /** A forced build (`rebuild`): app → the identity's own tag, which its forced tag stands in for. */
  forcedOf?: Record<string, string>;
  codebuildId?: string;
  startedAt: string;
  expiresAt: number;
}

/**
 * What an environment's rebuild of an app pushed (table `builds`, key `keys.builds.rebuilt`): the forced
 * tag, taken instead of `identityTag` by the environment's later deploys at that identity.
 */
interface RebuiltPin {
  buildId: string;
  identityTag: string;
  tag: string;
  expiresAt: number;
}

/** The `detail` of a `CodeBuild Build State Change` event, as far as it is read here. */
export interface BuildStateChange {
  'build-status': string;
  'build-id'?: string;
  'project-name'?: string;
  'additional-information'?: {
    environment?: { 'environment-variables'?: { name: string; value: string; type?: string }[] };
    logs?: { 'group-name'?: string; 'stream-name'?: string; 'deep-link'?: string };
  };
}

/**
 * Image builds on CodeBuild, the `build` half of the cloud runtime. One build per `build` call builds
 * every app that needs it from the staged source archive (`artifactKeys.source`), each from its
 * `dockerfile` in its `context` with its `buildArgs`, and pushes it to the image repository under the tag
 * of its build identity (build-identity.ts: its inputs, not the commit). An image with that tag, pushed by
 * any earlier build of the application (another commit, another pull request), is reused: only apps whose
 * inputs changed are built. `rebuild` builds anyway, under a tag of its own (the identity and a build
 * number) that only the environment asking takes: the identity's tag keeps its image, and that
 * environment's later deploys at the same identity take its rebuilt image (`keys.builds.rebuilt`), not
 * the identity's. Each image carries
 * the commit it was built from (a manifest annotation), which `builds` reports for reused ones. BuildKit
 * keeps each app's layer cache in the repository (`buildcache-<scope>`): a built app rebuilds only the
 * layers its change touches.
 *
 * The build does not get the task token: CodeBuild's events echo a build's environment. It gets its own
 * name (`PREVIEW_BUILD_REF`); the token waits in the `builds` table under that name, written before the
 * build starts, and `onBuildFinished` (the target of the EventBridge rule on the project's terminal
 * states) ends the task: success with `{ images: { app: uri@digest } }`, or `DeployFailed` with the last
 * lines of the build's log and where the full log is. So the state machine pays the same transitions for
 * a one-minute and a thirty-minute build.
 */
export class CodeBuildImages implements ImageBuilder, AppLogs {
  private buildLogs?: BuildLogs;
  constructor(private readonly opts: CodeBuildImagesOptions) {}

  /** Unique per (organization, repository, app): what every tag of the app starts with. */
  scopeOf(target: Pick<RuntimeTarget, 'orgId' | 'repoFullName'>, app: string): string {
    return createHash('sha256')
      .update(`${target.orgId}/${repoKey(target.repoFullName)}/${app}`)
      .digest('hex')
      .slice(0, 16);
  }

  /**
   * The tag of an app's image: its scope and build identity (`identity`), plus a build number for a
   * forced build (`forced`), whose image no other environment takes.
   */
  tagOf(
    target: Pick<RuntimeTarget, 'orgId' | 'repoFullName'>,
    app: string,
    identity: string,
    forced?: number,
  ): string {
    return `${this.scopeOf(target, app)}-${identity}${forced === undefined ? '' : `-b${forced}`}`;
  }

  /** An app's build identity at a commit with this builder (build-identity.ts). */
  identityOf(spec: AppSpec, sha: string, inputs: BuildOptions['inputs'], app: string): string {
    return buildIdentity({ spec, sha: sha.toLowerCase(), inputs: inputs?.[app] }, IMAGE_BUILDER_VERSION);
  }

  async build(
    target: RuntimeTarget,
    sha: string,
    apps: Record<string, AppSpec>,
    token: string,
    options: BuildOptions = {},
  ): Promise<void> {
    // Before anything is written.
    const codebuild = this.client('codebuild');
    const bucket = this.opts.artifactsBucket;
    if (!bucket)
      throw new ConfigError('ARTIFACTS_BUCKET is not set: image builds download their source from it');
    // A forced build's number: unique enough per app and identity (milliseconds of the request).
    const forced = options.rebuild ? Date.now() : undefined;
    const tags = Object.fromEntries(
      Object.entries(apps).map(([app, spec]) => [
        app,
        this.tagOf(target, app, this.identityOf(spec, sha, options.inputs, app), forced),
      ]),
    );
    const found = options.rebuild ? {} : await this.existingFor(target, tags);
    const reused = Object.fromEntries(Object.entries(found).map(([app, f]) => [app, f.image]));
    const reusedFrom = Object.fromEntries(Object.entries(found).map(([app, f]) => [app, f.commit]));
    const toBuild = Object.keys(apps).filter((app) => !(app in reused));
    // Fenced like every step: a build of a generation a newer request or a teardown replaced starts
    // nothing (asked last, right before anything is recorded, started or reported).
    if (options.current && !(await options.current()))
      throw new Superseded(`generation ${target.generation} superseded: no image build started`);
    if (toBuild.length === 0) {
      await this.opts.complete(token, {
        ok: true,
        output: { images: reused, builds: buildResults({}, reusedFrom, sha) },
      });
      return;
    }
    const buildId = newId();
    const now = Date.now();
    const record: BuildRecord = {
      buildId,
      taskToken: token,
      orgId: target.orgId,
      envKey: target.envKey,
      generation: target.generation,
      tags: Object.fromEntries(toBuild.map((app) => [app, tags[app]!])),
      reused,
      sha: sha.toLowerCase(),
      reusedFrom,
      ...(forced === undefined
        ? {}
        : {
            forcedOf: Object.fromEntries(
              toBuild.map((app) => [
                app,
                this.tagOf(target, app, this.identityOf(apps[app]!, sha, options.inputs, app)),
              ]),
            ),
          }),
      startedAt: new Date(now).toISOString(),
      expiresAt: Math.floor(now / 1000) + RECORD_TTL_SECONDS,
    };
    await ddb().send(new PutCommand({ TableName: table('builds'), Item: record }));
    const builds = toBuild.map((app) => ({
      app,
      dockerfile: apps[app]!.dockerfile ?? 'Dockerfile',
      context: apps[app]!.context ?? '.',
      tag: tags[app]!,
      commit: sha.toLowerCase(),
      buildArgs: apps[app]!.buildArgs ?? {},
      cache: `${BUILD_CACHE_TAG_PREFIX}${this.scopeOf(target, app)}`,
    }));
    const out = await codebuild.send(
      new StartBuildCommand({
        projectName: this.opts.project,
        idempotencyToken: buildId,
        environmentVariablesOverride: [
          { name: BUILD_REF_VAR, value: buildId, type: 'PLAINTEXT' },
          { name: 'SOURCE_BUCKET', value: bucket, type: 'PLAINTEXT' },
          {
            name: 'SOURCE_KEY',
            value: artifactKeys.source(target.orgId, target.repoFullName, sha),
            type: 'PLAINTEXT',
          },
          { name: 'IMAGE_REPOSITORY_URI', value: this.opts.repositoryUri, type: 'PLAINTEXT' },
          { name: 'BUILDS', value: JSON.stringify(builds), type: 'PLAINTEXT' },
        ],
      }),
    );
    await ddb()
      .send(
        new UpdateCommand({
          TableName: table('builds'),
          Key: { buildId },
          UpdateExpression: 'SET codebuildId = :id',
          ConditionExpression: 'attribute_exists(buildId)',
          ExpressionAttributeValues: { ':id': out.build?.id ?? 'unknown' },
        }),
      )
      .catch((err) => {
        // The build already finished and its record is gone: nothing to note.
        if (!isConditionFailure(err)) throw err;
      });
    await this.pointLogs(target, toBuild, {
      codebuildId: out.build?.id,
      // CodeBuild names a build's stream after the build's id (`<project>:<stream>`).
      ...(this.opts.logGroup && out.build?.id?.includes(':')
        ? { logGroup: this.opts.logGroup, logStream: out.build.id.slice(out.build.id.indexOf(':') + 1) }
        : {}),
    });
    log.info('image build started', { buildId, codebuildId: out.build?.id, apps: toBuild.join(',') });
  }

  /** Record where `apps`' latest build logs (each app of a build points at the build's one stream). */
  private async pointLogs(
    target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
    apps: string[],
    where: Omit<LogPointer, 'buildId' | 'expiresAt'>,
  ) {
    const expiresAt = Math.floor(Date.now() / 1000) + LOG_POINTER_TTL_SECONDS;
    await Promise.all(
      apps.map((app) =>
        ddb().send(
          new PutCommand({
            TableName: table('builds'),
            Item: {
              buildId: keys.builds.latestLog(target.orgId, target.envKey, app),
              ...where,
              expiresAt,
            } satisfies LogPointer,
          }),
        ),
      ),
    );
  }

  /** The end of an app's latest image build log (codebuild/build-logs.ts `BuildLogs`, on this adapter's client). */
  logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    this.buildLogs ??= new BuildLogs(this.client('logs'));
    return this.buildLogs.logs(target, app, query);
  }

  /**
   * End the task of a build that reached a terminal state. The record (the task token) is deleted only
   * once the task is ended: when anything before fails (the log pointer, ECR, Step Functions), the error
   * reaches Lambda, whose retry of the event finds the record and ends the task then (after its retries,
   * the event goes to the function's on-failure queue with the record still there). A redelivered event
   * after that, or one for a build this service did not start, does nothing; two deliveries at once may
   * both end the task, and the second is a no-op (`completeTask` ignores a task that has ended). A build
   * whose generation `current` says was superseded meanwhile ends its task with `Superseded` (the
   * execution ends quietly), whatever the build did.
   */
  async onBuildFinished(
    detail: BuildStateChange,
    opts: {
      current?: (record: Pick<BuildRecord, 'orgId' | 'envKey' | 'generation'>) => Promise<boolean>;
      /**
       * The secret values a failed build's quoted output is masked with (`[secret]`), for the apps it
       * built; asked only when a build failed.
       */
      secretValues?: (scope: Pick<BuildRecord, 'orgId' | 'envKey'>, apps: string[]) => Promise<string[]>;
    } = {},
  ): Promise<'completed' | 'ignored'> {
    const vars = detail['additional-information']?.environment?.['environment-variables'] ?? [];
    const buildId = vars.find((v) => v.name === BUILD_REF_VAR)?.value;
    if (!buildId) return 'ignored';
    const { Item } = await ddb().send(
      new GetCommand({ TableName: table('builds'), Key: { buildId }, ConsistentRead: true }),
    );
    const record = Item as BuildRecord | undefined;
    if (!record) return 'ignored';
    const logs = detail['additional-information']?.logs;
    if (logs?.['group-name'] && logs['stream-name'])
      await this.pointLogs(record, Object.keys(record.tags), {
        codebuildId: detail['build-id'] ?? record.codebuildId,
        logGroup: logs['group-name'],
        logStream: logs['stream-name'],
      });
    const outcome: TaskOutcome =
      opts.current && !(await opts.current(record))
        ? {
            ok: false,
            error: 'Superseded',
            cause: `generation ${record.generation} was superseded while its image build ran`,
          }
        : await this.outcomeOf(record, detail, buildId, opts.secretValues);
    await this.opts.complete(record.taskToken, outcome);
    await ddb()
      .send(
        new DeleteCommand({
          TableName: table('builds'),
          Key: { buildId },
          ConditionExpression: 'attribute_exists(buildId)',
        }),
      )
      .catch((err) => {
        if (!isConditionFailure(err)) throw err; // a concurrent delivery of the same event deleted it
      });
    return 'completed';
  }

  /** What a finished build ends its task with: the pushed images, or DeployFailed and its cause. */
  private async outcomeOf(
    record: BuildRecord,
    detail: BuildStateChange,
    buildId: string,
    secretValues?: (scope: Pick<BuildRecord, 'orgId' | 'envKey'>, apps: string[]) => Promise<string[]>,
  ): Promise<TaskOutcome> {
    if (detail['build-status'] !== 'SUCCEEDED') {
      const masked = (await secretValues?.(record, Object.keys(record.tags))) ?? [];
      return { ok: false, error: 'DeployFailed', cause: await this.failureCause(record, detail, masked) };
    }
    const built = await this.existing(record.tags);
    const missing = Object.keys(record.tags).filter((app) => !(app in built));
    if (missing.length > 0)
      return {
        ok: false,
        error: 'DeployFailed',
        cause: `image build ${detail['build-id'] ?? buildId} succeeded but pushed no image for ${missing.join(', ')}`,
      };
    await this.pinRebuilt(record);
    const images = Object.fromEntries(Object.entries(built).map(([app, f]) => [app, f.image]));
    const builtFrom = Object.fromEntries(
      Object.entries(built).map(([app, f]) => [app, record.sha ?? f.commit]),
    );
    return {
      ok: true,
      output: {
        images: { ...record.reused, ...images },
        builds: buildResults(builtFrom, record.reusedFrom ?? {}, record.sha ?? 'unknown'),
      },
    };
  }

  /** Keep a forced build's tags as the environment's images of their identities (`RebuiltPin`). */
  private async pinRebuilt(record: BuildRecord): Promise<void> {
    const expiresAt = Math.floor(Date.now() / 1000) + LOG_POINTER_TTL_SECONDS;
    await Promise.all(
      Object.entries(record.forcedOf ?? {}).map(([app, identityTag]) =>
        ddb().send(
          new PutCommand({
            TableName: table('builds'),
            Item: {
              buildId: keys.builds.rebuilt(record.orgId, record.envKey, app),
              identityTag,
              tag: record.tags[app]!,
              expiresAt,
            } satisfies RebuiltPin,
          }),
        ),
      ),
    );
  }

  /**
   * `existing`, but an app this environment rebuilt at the same identity takes its rebuilt image (when
   * ECR still has it; else the identity's, as any environment).
   */
  private async existingFor(
    target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
    tags: Record<string, string>,
  ): Promise<Record<string, { image: string; commit: string }>> {
    const pins = await Promise.all(
      Object.entries(tags).map(async ([app, tag]) => {
        const { Item } = await ddb().send(
          new GetCommand({
            TableName: table('builds'),
            Key: { buildId: keys.builds.rebuilt(target.orgId, target.envKey, app) },
          }),
        );
        const pin = Item as RebuiltPin | undefined;
        return pin?.identityTag === tag ? ([app, pin.tag] as const) : undefined;
      }),
    );
    const rebuilt = Object.fromEntries(pins.filter((p) => p !== undefined));
    const found = await this.existing({
      ...tags,
      ...Object.fromEntries(Object.entries(rebuilt).map(([app, tag]) => [`${app}\u0000rebuilt`, tag])),
    });
    const out: Record<string, { image: string; commit: string }> = {};
    for (const app of Object.keys(tags)) {
      const image = found[`${app}\u0000rebuilt`] ?? found[app];
      if (image) out[app] = image;
    }
    return out;
  }

  /** A client this instance was given (each handler's getter gives only those its calls use). */
  private client<K extends 'codebuild' | 'logs'>(name: K): NonNullable<CodeBuildImagesOptions[K]> {
    const client = this.opts[name];
    if (!client) throw new ConfigError(`these CodeBuild images were built without a ${name} client`);
    return client as NonNullable<CodeBuildImagesOptions[K]>;
  }

  /**
   * App → its image (`uri@digest`) and the commit it was built from (its manifest's revision annotation;
   * `unknown` for an image without one), for the tags that exist in the repository.
   */
  private async existing(
    tags: Record<string, string>,
  ): Promise<Record<string, { image: string; commit: string }>> {
    const entries = Object.entries(tags);
    if (entries.length === 0) return {};
    const repositoryName = this.opts.repositoryUri.slice(this.opts.repositoryUri.indexOf('/') + 1);
    const out = await this.opts.ecr.send(
      new BatchGetImageCommand({
        repositoryName,
        imageIds: entries.map(([, tag]) => ({ imageTag: tag })),
        acceptedMediaTypes: [
          'application/vnd.docker.distribution.manifest.v2+json',
          'application/vnd.oci.image.manifest.v1+json',
          'application/vnd.oci.image.index.v1+json',
          'application/vnd.docker.distribution.manifest.list.v2+json',
        ],
      }),
    );
    const found: Record<string, { image: string; commit: string }> = {};
    for (const image of out.images ?? []) {
      const app = entries.find(([, tag]) => tag === image.imageId?.imageTag)?.[0];
      if (app && image.imageId?.imageDigest)
        found[app] = {
          image: `${this.opts.repositoryUri}@${image.imageId.imageDigest}`,
          commit: revisionOf(image.imageManifest),
        };
    }
    return found;
  }

  /**
   * `<cause> (image build failed for web, api: app web: docker buildx build of ./Dockerfile failed: process
   * "/bin/sh -c npm ci" did not complete successfully: exit code: 1); last output: <the build's last
   * lines>; full log: previewctl envs logs web --repo … --pr … --source build, or CloudWatch Logs <group> /
   * <stream>`; without a cause found, the same less its first word. Only what the build printed itself is
   * read: CodeBuild's `[Container]` lines (the commands it echoes, its phases) are left out, and every
   * value of `masked` (the apps' secrets) in it reads `[secret]` before any line is quoted or cut.
   */
  private async failureCause(
    record: BuildRecord,
    detail: BuildStateChange,
    masked: string[],
  ): Promise<string> {
    const logs = detail['additional-information']?.logs;
    const where = logs?.['group-name']
      ? `CloudWatch Logs ${logs['group-name']} / ${logs['stream-name'] ?? '?'}${logs['deep-link'] ? ` (${logs['deep-link']})` : ''}`
      : `the CodeBuild console, build ${detail['build-id'] ?? record.codebuildId ?? record.buildId}`;
    let lines: string[] = [];
    if (logs?.['group-name'] && logs['stream-name']) {
      try {
        const out = await this.client('logs').send(
          new GetLogEventsCommand({
            logGroupName: logs['group-name'],
            logStreamName: logs['stream-name'],
            limit: CAUSE_SEARCH_LINES,
            startFromHead: false,
          }),
        );
        lines = (out.events ?? []).map((e) => (e.message ?? '').trimEnd()).filter(Boolean);
      } catch (err) {
        log.warn('could not read the build log', { buildId: record.buildId, error: (err as Error).name });
      }
    }
    const apps = Object.keys(record.tags);
    // What the build printed itself: CodeBuild's own lines (`[Container] …`: the commands it ran, its
    // phases) are not the build's output. Builds get no secret bundle, but a build may print a value it
    // holds another way: masked as the app's log is, whole lines before any is cut.
    const own = maskSecrets(lines.filter((l) => !isCodeBuildLine(l)).join('\n'), masked).split('\n');
    // The build script's last word names the app that failed and why (BuildKit's verdict: the command).
    const verdict = own
      .map((l) => /^PREVIEW-BUILD-FAILED app=(\S+): (.*)$/.exec(l))
      .findLast((m) => m !== null);
    const failedApp = verdict?.[1] && apps.includes(verdict[1]) ? verdict[1] : apps[0]!;
    const which = verdict ? `: app ${verdict[1]}: ${verdict[2]!.trim()}` : '';
    const what = `image build ${detail['build-status'].toLowerCase()} for ${apps.join(', ')}${which}`;
    // The cause is searched above the verdict (which is not one), in the build's own output.
    const printed = own.filter((l) => !l.startsWith('PREVIEW-BUILD'));
    const env = keys.environments.parseEnvKey(record.envKey);
    const logRef = { target: { repoFullName: env.repo, prNumber: env.prNumber }, app: failedApp };
    const last = lastPrinted(printed);
    const cause = leadingCause(printed.join('\n'));
    const full = `full log: ${logsCommand(logRef.target, logRef.app, 'build')}`;
    const message = cause
      ? `${cause} (${what}); last output: ${last || '(no output)'}; ${full}`
      : `${what}; last output: ${last || '(no output)'}; ${full}`;
    return `${message}, or ${where}`;
  }
}

/** How many of the build's own last lines a failure quotes, and at most how many characters of each. */
const QUOTED_LINES = 6;
const QUOTED_LINE_CHARS = 200;
/** BuildKit's frame around a failed step (`------`, `>>> RUN …`, `  12 | RUN …`, `Dockerfile:12`). */
const BUILDKIT_FRAME = /^(?:-{4,}|={4,}|>>>|\s*\d+ \|(?:\s|$)|Dockerfile(?:\.[\w.-]+)?:\d+$|\s*-{8,}\s*$)/;

/** The last lines the build printed itself (BuildKit's frame left out), ` | `-joined and capped. */
function lastPrinted(printed: string[]): string {
  return printed
    .filter((l) => !BUILDKIT_FRAME.test(l))
    .slice(-QUOTED_LINES)
    .map((l) => (l.length > QUOTED_LINE_CHARS ? `${l.slice(0, QUOTED_LINE_CHARS - 1)}…` : l))
    .join(' | ');
}

/** `builds` of a task's output: the apps built (from `sha`) and those reused (from their own commits). */
function buildResults(
  built: Record<string, string>,
  reusedFrom: Record<string, string>,
  sha: string,
): Record<string, BuildResult> {
  return {
    ...Object.fromEntries(
      Object.entries(reusedFrom).map(([app, commit]) => [app, { result: 'reused' as const, commit }]),
    ),
    ...Object.fromEntries(
      Object.keys(built).map((app) => [app, { result: 'built' as const, commit: built[app] ?? sha }]),
    ),
  };
}

/** The commit an image manifest's revision annotation names, else `unknown`. */
function revisionOf(manifest: string | undefined): string {
  try {
    const parsed = JSON.parse(manifest ?? '{}') as { annotations?: Record<string, string> };
    const revision = parsed.annotations?.[REVISION_ANNOTATION];
    return typeof revision === 'string' && /^[0-9a-f]{40}$/.test(revision) ? revision : 'unknown';
  } catch {
    return 'unknown';
  }
}
