import { Aws, Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as codebuild from 'aws-cdk-lib/aws-codebuild';
import type * as ecr from 'aws-cdk-lib/aws-ecr';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { BUILDKIT_IMAGE, REVISION_ANNOTATION } from '../../../functions/ports/runtime/codebuild/builder.js';
import { type ImageBuildResources, sourcesPrefix } from '../access.js';
import { acknowledge, acknowledgeWildcardResource } from '../nag.js';

/** The CPU architecture image builds run on, hence the architecture of the images they produce. */
export type ImageBuildArchitecture = 'x86_64' | 'arm64';
export const imageBuildArchitectures: readonly ImageBuildArchitecture[] = ['x86_64', 'arm64'];

export interface ImageBuildProjectProps {
  /** Where FetchSource staged the source archives (the build reads `sources/*` only). */
  artifacts: s3.IBucket;
  /** Where the images go. */
  repository: ecr.IRepository;
  /**
   * x86_64 builds amd64 images, which most Dockerfiles, base images and EKS node groups assume; arm64
   * builds arm64 images, cheaper to build and run where every app's base images support it.
   * @default 'x86_64'
   */
  architecture?: ImageBuildArchitecture;
  /** @default codebuild.ComputeType.SMALL (3 GB, 2 vCPUs) */
  computeType?: codebuild.ComputeType;
  /**
   * How long one build (every app of an environment, one after the other) may run.
   * @default Duration.minutes(30)
   */
  timeout?: Duration;
  /**
   * How long a build may wait for capacity before CodeBuild gives it up (CodeBuild's own default is 8
   * hours, far beyond the BuildImages task's timeout).
   * @default Duration.minutes(20)
   */
  queuedTimeout?: Duration;
  /** @default logs.RetentionDays.ONE_MONTH */
  logRetention?: logs.RetentionDays;
}

/** Environment variables the buildspec reads; StartBuild passes the per-build ones. */
export const imageBuildEnv = {
  /** The artifacts bucket (project default; StartBuild may pass it again). */
  bucket: 'SOURCE_BUCKET',
  /** Per build: the source archive's key, `sources/<orgId>/<owner>/<repo>/<sha>.tar.gz`. */
  key: 'SOURCE_KEY',
  /** The image repository (project default). */
  repositoryUri: 'IMAGE_REPOSITORY_URI',
  /**
   * Per build: `[{"app","dockerfile","context","tag","commit","buildArgs","cache"}]` (dockerfile relative
   * to context; `cache` the tag of the app's layer cache in the repository).
   */
  builds: 'BUILDS',
} as const;

/** The build's work directory (a buildspec variable): its scripts, and the source archive unpacked. */
const workDir = '/tmp/preview';
/** Buildspec variables: the work directory, and each phase's script, base64 (no `$` for anyone to expand). */
export const imageBuildScriptEnv = {
  workDir: 'PREVIEW_WORK_DIR',
  fetch: 'PREVIEW_FETCH_SCRIPT',
  build: 'PREVIEW_BUILD_SCRIPT',
} as const;

/** The BuildKit builder the buildspec creates (`docker buildx create`, docker-container driver). */
const builderName = 'preview';

/**
 * The buildspec: download and unpack the staged source archive, log in to ECR, start a BuildKit builder,
 * then build and push each entry of $BUILDS in order with `docker buildx build`: its build arguments, the
 * commit as the manifest's revision annotation, and the app's layer cache in the image repository
 * (`--cache-from`/`--cache-to type=registry,…,mode=max`: every layer, intermediate stages too, so a
 * changed app rebuilds only the layers its change touches). Every line the build writes about an app
 * starts with `PREVIEW-BUILD`, and a failure is one `PREVIEW-BUILD-FAILED app=<app>: <why>` line, the
 * build's last, so a log tail names the app; a failed `docker buildx build` names BuildKit's own verdict
 * (`process "/bin/sh -c npm ci" did not complete successfully: exit code: 1`), the failing command.
 *
 * Each phase runs a script file (`fetch.sh`, `build.sh`, written from base64 buildspec variables), so the
 * command CodeBuild echoes in `Running command`, `Command did not exit successfully` and `Phase context …
 * Error while executing command` is one short line (`bash "$PREVIEW_WORK_DIR/build.sh"`), never the
 * script's text: the log is the build's own output. Each script runs with `set -euo pipefail` in its own
 * bash, leaving CodeBuild's shell alone.
 */
export function imageBuildSpec(): Record<string, unknown> {
  const { workDir: dirVar, fetch: fetchVar, build: buildVar } = imageBuildScriptEnv;
  const scripts = imageBuildScripts();
  const b64 = (script: string) => Buffer.from(`${script}\n`).toString('base64');
  return {
    version: '0.2',
    env: {
      shell: 'bash',
      variables: {
        DOCKER_BUILDKIT: '1',
        BUILDKIT_PROGRESS: 'plain',
        // One image manifest per push, no attestation index whose untagged children the lifecycle expires.
        BUILDX_NO_DEFAULT_ATTESTATIONS: '1',
        [dirVar]: workDir,
        [fetchVar]: b64(scripts.fetch),
        [buildVar]: b64(scripts.build),
      },
    },
    phases: {
      pre_build: {
        commands: [
          `mkdir -p "$${dirVar}" && base64 -d <<<"$${fetchVar}" >"$${dirVar}/fetch.sh" && base64 -d <<<"$${buildVar}" >"$${dirVar}/build.sh"`,
          `bash "$${dirVar}/fetch.sh"`,
        ],
      },
      build: { commands: [`bash "$${dirVar}/build.sh"`] },
    },
  };
}

/** The scripts of the buildspec's phases (`imageBuildSpec`), as text. */
export function imageBuildScripts(): { fetch: string; build: string } {
  const { bucket, key, repositoryUri, builds } = imageBuildEnv;
  const sourceDir = `"$${imageBuildScriptEnv.workDir}/source"`;
  const fetch = [
    '#!/usr/bin/env bash',
    'set -euo pipefail',
    `for name in ${bucket} ${key} ${repositoryUri} ${builds}; do`,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash indirect expansion, not a JS placeholder
    '  if [ -z "${!name:-}" ]; then echo "PREVIEW-BUILD-FAILED app=-: $name is not set"; exit 1; fi',
    'done',
    `if ! jq -e 'type == "array" and length > 0 and all(.[]; (.app | type) == "string" and (.tag | type) == "string")' >/dev/null <<<"$${builds}"; then`,
    `  echo "PREVIEW-BUILD-FAILED app=-: ${builds} is not a non-empty JSON array of {app, dockerfile, context, tag}"`,
    '  exit 1',
    'fi',
    `rm -rf ${sourceDir} && mkdir -p ${sourceDir}`,
    `if ! aws s3 cp --only-show-errors "s3://$${bucket}/$${key}" ${sourceDir}.tar.gz; then`,
    `  echo "PREVIEW-BUILD-FAILED app=-: cannot download s3://$${bucket}/$${key}"; exit 1`,
    'fi',
    `tar -xzf ${sourceDir}.tar.gz -C ${sourceDir} --strip-components=1`,
    `aws ecr get-login-password --region "$AWS_REGION" | docker login --username AWS --password-stdin "\${${repositoryUri}%%/*}"`,
    // The docker driver cannot export a registry cache: a BuildKit container (it reads docker's login).
    `docker buildx create --name ${builderName} --driver docker-container --driver-opt image=${BUILDKIT_IMAGE} --use >/dev/null`,
  ];
  const build = [
    '#!/usr/bin/env bash',
    'set -euo pipefail',
    `cd ${sourceDir}`,
    `output="$${imageBuildScriptEnv.workDir}/buildx.log"`,
    `count=$(jq 'length' <<<"$${builds}")`,
    'for i in $(seq 0 $((count - 1))); do',
    `  entry=$(jq -c ".[$i]" <<<"$${builds}")`,
    `  app=$(jq -r '.app' <<<"$entry")`,
    `  context=$(jq -r '.context // "."' <<<"$entry")`,
    `  dockerfile=$(jq -r '.dockerfile // "Dockerfile"' <<<"$entry")`,
    `  tag=$(jq -r '.tag' <<<"$entry")`,
    `  commit=$(jq -r '.commit // ""' <<<"$entry")`,
    `  cache="$${repositoryUri}:$(jq -r '.cache // ("buildcache-" + .app)' <<<"$entry")"`,
    // NUL-separated, so that a value may hold any character but NUL.
    `  mapfile -d '' args < <(jq -j '(.buildArgs // {}) | to_entries[] | "--build-arg=\\(.key)=\\(.value)\\u0000"' <<<"$entry")`,
    `  image="$${repositoryUri}:$tag"`,
    `  if ! [[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then`,
    '    echo "PREVIEW-BUILD-FAILED app=$app: \\"$tag\\" is not a valid image tag"; exit 1',
    '  fi',
    '  if [ ! -f "$context/$dockerfile" ]; then',
    '    echo "PREVIEW-BUILD-FAILED app=$app: no Dockerfile at $context/$dockerfile"; exit 1',
    '  fi',
    '  echo "PREVIEW-BUILD app=$app: building $context/$dockerfile as $image"',
    // Its output goes to the log as it comes, and to a file the failure line quotes BuildKit's verdict from.
    `  if ! docker buildx build --builder ${builderName} --progress plain -f "$context/$dockerfile" "\${args[@]}" \\`,
    `      --annotation "manifest:${REVISION_ANNOTATION}=$commit" --provenance=false \\`,
    `      --cache-from "${cacheFrom('$cache')}" \\`,
    `      --cache-to "${cacheTo('$cache')}" \\`,
    '      --output "type=image,name=$image,push=true,oci-mediatypes=true" "$context" 2>&1 | tee "$output"; then',
    `    why=$(sed -n 's/^\\(#[0-9]* \\)\\{0,1\\}ERROR: \\(failed to solve: \\)\\{0,1\\}//p' "$output" | tail -n 1)`,
    `    echo "PREVIEW-BUILD-FAILED app=$app: docker buildx build of $context/$dockerfile failed: \${why:-its output is above}"; exit 1`,
    '  fi',
    '  echo "PREVIEW-BUILD app=$app: pushed $image"',
    'done',
  ];
  return { fetch: fetch.join('\n'), build: build.join('\n') };
}

/** `--cache-from` of an app's build: its layer cache in the image repository. */
export const cacheFrom = (ref: string) => `type=registry,ref=${ref}`;
/** `--cache-to`: every layer (`mode=max`), as an OCI image manifest ECR stores like any image. */
export const cacheTo = (ref: string) =>
  `type=registry,ref=${ref},mode=max,image-manifest=true,oci-mediatypes=true`;

/**
 * The image build: a CodeBuild project without source (NO_SOURCE, inline buildspec) that builds app images
 * from a staged source archive and pushes them to the image repository. Privileged, because `docker build`
 * needs the Docker daemon. Its role reads `sources/*` of the artifacts bucket, pushes to that one
 * repository and writes its own log group; nothing else. The task token never reaches a build: CodeBuild's
 * events echo a build's environment variables.
 */
export class ImageBuildProject extends Construct implements ImageBuildResources {
  readonly project: codebuild.Project;
  readonly logGroup: logs.LogGroup;
  readonly repository: ecr.IRepository;
  readonly architecture: ImageBuildArchitecture;

  constructor(scope: Construct, id: string, props: ImageBuildProjectProps) {
    super(scope, id);
    this.repository = props.repository;
    this.architecture = props.architecture ?? 'x86_64';
    if (!imageBuildArchitectures.includes(this.architecture)) {
      throw new Error(`image build architecture must be one of ${imageBuildArchitectures.join(', ')}`);
    }
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.project = new codebuild.Project(this, 'Project', {
      description:
        'Builds preview app images from staged source archives and pushes them to the image repository',
      buildSpec: codebuild.BuildSpec.fromObject(imageBuildSpec()),
      environment: {
        buildImage:
          this.architecture === 'arm64'
            ? codebuild.LinuxArmBuildImage.AMAZON_LINUX_2023_STANDARD_3_0
            : codebuild.LinuxBuildImage.STANDARD_7_0,
        computeType: props.computeType ?? codebuild.ComputeType.SMALL,
        privileged: true,
        environmentVariables: {
          [imageBuildEnv.bucket]: { value: props.artifacts.bucketName },
          [imageBuildEnv.repositoryUri]: { value: props.repository.repositoryUri },
        },
      },
      timeout: props.timeout ?? Duration.minutes(30),
      queuedTimeout: props.queuedTimeout ?? Duration.minutes(20),
      logging: { cloudWatch: { logGroup: this.logGroup } },
    });

    const sources = props.artifacts.arnForObjects(`${sourcesPrefix}*`);
    this.project.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [sources] }),
    );
    // Push the images and the layer cache, and pull the cache back (--cache-from): this repository only.
    props.repository.grantPullPush(this.project);

    const role = this.project.role as iam.Role;
    acknowledgeWildcardResource(
      role,
      sources,
      'A build downloads the one source archive StartBuild names (SOURCE_KEY), known only at run time; the ' +
        'grant is read-only and limited to the sources/ prefix of the artifacts bucket.',
    );
    acknowledge(
      role,
      'AwsSolutions-IAM5[Resource::*]',
      'ecr:GetAuthorizationToken (docker login) has no resource-level permissions, so IAM requires Resource ' +
        '"*"; the push actions are granted on the image repository only.',
    );
    const name = this.project.projectName;
    acknowledgeWildcardResource(
      role,
      `arn:${Aws.PARTITION}:logs:${Aws.REGION}:${Aws.ACCOUNT_ID}:log-group:/aws/codebuild/${name}:*`,
      "Added by CDK to every project: its default log group /aws/codebuild/<project> and that group's " +
        'streams. This project logs to its own log group instead (IMAGE_BUILD_LOG_GROUP), and the grant names ' +
        "only this project's default group.",
    );
    acknowledgeWildcardResource(
      role,
      `arn:${Aws.PARTITION}:codebuild:${Aws.REGION}:${Aws.ACCOUNT_ID}:report-group/${name}-*`,
      "Added by CDK to every project: CodeBuild's test-report calls on the report groups named <project>-*. " +
        "The buildspec defines no reports; the grant names only this project's report groups.",
    );
    acknowledge(
      this.project,
      'AwsSolutions-CB4',
      'The project produces no build artifacts (NO_ARTIFACTS) and has no CodeBuild cache (its layer cache is ' +
        'an image in ECR): its outputs are images in ECR (encrypted at rest by ECR) and logs in CloudWatch ' +
        'Logs, so a project KMS key would encrypt nothing.',
    );
  }
}
