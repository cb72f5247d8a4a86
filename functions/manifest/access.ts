/**
 * What a function may touch: the access every manifest gives its Lambdas (routes, state-machine steps,
 * event targets, workers), which the CDK turns into least-privilege grants and environment variables.
 * Its own file so the manifests that name it (and the state machines a function may start) import no
 * other manifest. Plain data, like the manifests.
 */
import type { TableName } from './tables.js';

/** The state machines of the service (workflows.ts: each one's ASL file and the entries of its tasks). */
export type WorkflowName = 'deploy' | 'teardown' | 'redeployApp' | 'testRun';

export interface RouteAccess {
  /** Tables the handler reads (`R`) or reads and writes (`RW`). Tenancy is always readable (auth). */
  tables: Partial<Record<TableName, 'R' | 'RW'>>;
  /** State machines the handler starts. */
  starts?: WorkflowName[];
  /** Access to secret-bundle values (Secrets Manager in AWS): read them, or read and write. */
  secrets?: 'R' | 'RW';
  /** The handler talks to the source host (in AWS: reads the GitHub App secret; GITHUB_* env vars). */
  sourceHost?: true;
  /** Staged source archives (in AWS: the artifacts S3 bucket, ARTIFACTS_BUCKET): read, or read and write. */
  artifacts?: 'R' | 'RW';
  /**
   * The handler starts image builds and reads their outcome (in AWS: StartBuild on the image-build
   * project, BatchGetImage on the image repository, GetLogEvents on the build log; IMAGE_* env vars).
   */
  imageBuilds?: true;
  /**
   * The handler reads apps' and builds' output through the runtime (in AWS: the image-build settings and
   * logs:GetLogEvents on its log group, the cluster's settings and its API: its endpoint and CA, which the
   * stack resolves at deploy time, and an access entry in the group deploy/rbac.yaml gives pods list,
   * pods/log get and secrets get). Starts,
   * changes and ends nothing.
   */
  logs?: true;
  /**
   * The handler calls the cluster the apps run on (EKS in AWS): its settings (EKS_* env vars). Grants
   * nothing by itself: getting into the cluster's API is `bindClusterAccess` of lib/cdk/api-function.ts.
   */
  runtime?: true;
  /**
   * The handler starts the rollout watcher (in AWS: lambda:InvokeFunction on the watcher Lambda;
   * ROLLOUT_WATCHER_FUNCTION, except on the watcher itself, which invokes itself by its own name).
   */
  invokesWatcher?: true;
  /**
   * The handler ends or heartbeats callback tasks of the state machines with the token it was given (in
   * AWS: states:SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat on them).
   */
  completesTasks?: true;
  /**
   * The handler puts events on the service's own event bus (in AWS: events:PutEvents on that bus;
   * EVENT_BUS_NAME).
   */
  publishes?: true;
  /**
   * The handler reports an environment's status on its pull request (in AWS: reads the GitHub App
   * secret; GITHUB_* env vars; the App needs Deployments and Pull requests write).
   */
  prStatus?: true;
  /**
   * The handler brings the merge gate's check run, with its links when the stack has a public URL (the
   * `publicUrl` context key, PUBLIC_URL): it signs report links (a failed step's screenshot is the
   * report at that step), so it reads the link-signing secret (RUN_LINK_SECRET_ARN), and no media;
   * granted with or without a URL, so the setting its link signer requires is always there.
   */
  gateLinks?: true;
  /**
   * Test-run media (screenshots, videos) and run-report links: `R` mints URLs and links (in AWS: presigned
   * GETs of the media bucket, MEDIA_BUCKET, and the link-signing secret, RUN_LINK_SECRET_ARN), `W` only
   * stores media (PutObject into MEDIA_BUCKET; no link secret), `RW` both.
   */
  media?: 'R' | 'W' | 'RW';
  /**
   * The function drives a headless browser (in AWS: x86_64, at least 2 GB, a 15-minute timeout,
   * @sparticuz/chromium and an ffmpeg binary at PREVIEW_FFMPEG_PATH, by default /opt/bin/ffmpeg).
   */
  browser?: true;
}
