/**
 * A loopback fake of the AWS APIs the cloud adapters call, for the cloud simulation tier. Test support code,
 * not product: the real handlers run in `PREVIEW_MODE=aws` with their SDK clients pointed here through the
 * standard `AWS_ENDPOINT_URL_<SERVICE>` variables (DynamoDB goes to dynalite instead).
 *
 * What it implements, and only that:
 * - Secrets Manager (JSON 1.1): GetSecretValue, PutSecretValue, CreateSecret.
 * - Step Functions (JSON 1.0): StartExecution, SendTaskSuccess, SendTaskFailure, SendTaskHeartbeat — the
 *   state machines are the project's ASL files run in-process by the local ASL runner (LocalWorkflows),
 *   whose tasks invoke the real step handlers, as Lambda would.
 * - CodeBuild (JSON 1.1): StartBuild (recorded; `finishBuild` plays the build and its terminal event). A
 *   project's buildspec (`projectBuildSpecs`) is echoed as CodeBuild echoes it: `Running command <command>`
 *   verbatim, every line of it, then on failure `Command did not exit successfully`, the phase's end and its
 *   `Phase context … Error while executing command: <command>` (the failing command: the build phase's last).
 * - ECR (JSON 1.1): BatchGetImage (images "pushed" by `finishBuild` or `pushImage`; the manifest carries
 *   the annotations the buildspec's `--annotation manifest:…` would give it: the entry's `commit`).
 * - CloudWatch Logs (JSON 1.1): GetLogEvents (the lines a build "logged": `logBuild` while it runs,
 *   `finishBuild` at its end), in the project's log group (`projectLogGroups`, else CodeBuild's default).
 * - S3 (REST-XML, path-style: the S3 client addresses a bucket by path when its endpoint is an IP address,
 *   as this fake's is, so no `forcePathStyle` is configured anywhere): PutObject (plain or aws-chunked
 *   bodies), HeadObject, GetObject (also through a presigned URL), and multipart uploads as lib-storage's
 *   `Upload` makes them (CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload;
 *   part sizes and checksums are not checked).
 * - EventBridge (JSON 1.1): PutEvents (recorded).
 * - EKS DescribeCluster and Lambda Invoke (REST-JSON): `kubernetes-aws.ts`, routed by SigV4 scope.
 * - Fault injection for the JSON operations: `failNext('EventBridge.PutEvents', n)` makes the next n calls
 *   of an operation answer an AWS error (500 `InternalFailure` unless told) instead (still recorded);
 *   `beforeNext(operation, fn)` runs `fn` before the next call of an operation is answered (a race staged
 *   between two calls of a handler).
 * What it does not: signatures (SigV4 is not checked), pagination, IAM, anything else.
 * An unknown operation answers 400 `UnknownOperationException`, so a test notices.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WorkflowName } from '../../../functions/manifest/workflows.js';
import { LocalWorkflows } from '../../../functions/ports/workflows/local-asl.js';
import { FakeEksAndLambda } from './kubernetes-aws.js';

export const ACCOUNT = '000000000000';
export const REGION = 'eu-west-1';
export const machineArn = (name: WorkflowName) => `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${name}`;

/** An entry the fake recorded from PutEvents (`FakeAws.events`). */
export interface PutEventsEntry {
  EventBusName: string;
  Source: string;
  DetailType: string;
  Detail: string;
}

/** An event as EventBridge delivers it to a rule's target: `detail` under its envelope, with event id `id`. */
export const bridgeEvent = <T>(detailType: string, source: string, detail: T, id = 'evt-1') => ({
  version: '0',
  id,
  'detail-type': detailType,
  source,
  account: ACCOUNT,
  time: new Date().toISOString(),
  region: REGION,
  resources: [],
  detail,
});

/** A recorded PutEvents entry as EventBridge delivers it to a rule's target, with event id `id`. */
export const asDelivered = (e: PutEventsEntry, id = 'evt-1') =>
  bridgeEvent(e.DetailType, e.Source, JSON.parse(e.Detail), id);

export interface StartedBuild {
  id: string;
  projectName: string;
  env: Record<string, string>;
  status: 'IN_PROGRESS' | 'SUCCEEDED' | 'FAILED' | 'FAULT' | 'STOPPED' | 'TIMED_OUT';
  logs: { groupName: string; streamName: string };
}

/** The event CodeBuild puts on the default bus when a build changes state (the fields the service reads). */
export interface CodeBuildEvent {
  version: '0';
  id: string;
  'detail-type': 'CodeBuild Build State Change';
  source: 'aws.codebuild';
  account: string;
  time: string;
  region: string;
  resources: string[];
  detail: Record<string, unknown>;
}

class AwsError extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

export class FakeAws {
  readonly secrets = new Map<string, string>();
  readonly objects = new Map<string, { body: Buffer; contentType?: string }>();
  /** Multipart uploads in progress, by upload id (completed and aborted ones are gone). */
  readonly uploads = new Map<string, { key: string; contentType?: string; parts: Map<number, Buffer> }>();
  readonly builds: StartedBuild[] = [];
  /** `repository:tag` → digest. */
  readonly images = new Map<string, string>();
  readonly logEvents = new Map<string, string[]>();
  readonly events: unknown[] = [];
  /** Every call, as `Service.Operation` (or `S3.PUT /bucket/key`). */
  readonly calls: string[] = [];
  readonly workflows: LocalWorkflows;
  /** EKS DescribeCluster and Lambda Invoke (REST-JSON), claimed by their SigV4 scope. */
  readonly eksLambda = new FakeEksAndLambda(REGION);
  private server?: Server;
  private readonly faults: { operation: string; remaining: number; error: AwsError }[] = [];
  private readonly before: { operation: string; run: () => Promise<void> }[] = [];
  url = '';

  constructor(repoRoot: string) {
    this.workflows = new LocalWorkflows(repoRoot);
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: Error) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ __type: 'InternalFailure', message: err.message }));
      });
    });
    await new Promise<void>((ok) => this.server!.listen(0, '127.0.0.1', () => ok()));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await this.eksLambda.settled();
    await this.workflows.stop();
    await new Promise<void>((done) => {
      this.server?.close(() => done());
      this.server?.closeAllConnections();
    });
  }

  /** The `AWS_ENDPOINT_URL_<SERVICE>` variables that send every client here. */
  endpointEnv(): Record<string, string> {
    const services = [
      'SECRETS_MANAGER',
      'SFN',
      'CODEBUILD',
      'ECR',
      'CLOUDWATCH_LOGS',
      'S3',
      'EVENTBRIDGE',
      'EKS',
      'LAMBDA',
    ];
    return Object.fromEntries(services.map((s) => [`AWS_ENDPOINT_URL_${s}`, this.url]));
  }

  /** The next `count` calls of `operation` (`Service.Operation`, as in `calls`) answer an AWS error. */
  failNext(
    operation: string,
    count = 1,
    error: { type: string; message?: string; status?: number } = { type: 'InternalFailure', status: 500 },
  ): void {
    const err = new AwsError(error.type, error.message ?? 'injected fault', error.status ?? 500);
    this.faults.push({ operation, remaining: count, error: err });
  }

  /** Run `fn` before the next call of `operation` (`Service.Operation`) is answered, once. */
  beforeNext(operation: string, fn: () => Promise<void>): void {
    this.before.push({ operation, run: fn });
  }

  /** Put an image into the repository (as a build's `docker push` would); returns its digest. */
  /** Image manifests by digest (OCI, with the annotations pushed with them). */
  readonly manifests = new Map<string, string>();

  pushImage(repositoryName: string, tag: string, annotations: Record<string, string> = {}): string {
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${randomUUID()}` },
      layers: [],
      ...(Object.keys(annotations).length ? { annotations } : {}),
    });
    const digest = `sha256:${createHash('sha256').update(manifest).digest('hex')}`;
    this.manifests.set(digest, manifest);
    this.images.set(`${repositoryName}:${tag}`, digest);
    return digest;
  }

  /**
   * The log group a project logs to when it names one (as the stack's image-build project does); CodeBuild's
   * default `/aws/codebuild/<project>` otherwise. The stream is the build id's part after `<project>:`.
   */
  readonly projectLogGroups = new Map<string, string>();

  /** A project's buildspec (`{ phases: { <phase>: { commands } } }`), echoed by `finishBuild` as CodeBuild does. */
  readonly projectBuildSpecs = new Map<string, { phases: Record<string, { commands?: string[] }> }>();

  /**
   * What CodeBuild logs of a build around its commands' own output (`output`, printed by the failing
   * command, or by the build phase's last on success): each command echoed verbatim, every line of it.
   */
  private echoed(build: StartedBuild, status: StartedBuild['status'], output: string[]): string[] {
    const spec = this.projectBuildSpecs.get(build.projectName);
    if (!spec) return output;
    const at = () => `[Container] ${new Date().toISOString().replace('T', ' ').replace('Z', '')}`;
    const lines: string[] = [];
    const phases = ['install', 'pre_build', 'build', 'post_build'].filter((p) => spec.phases[p]);
    for (const phase of phases) {
      const name = phase.toUpperCase();
      lines.push(`${at()} Entering phase ${name}`);
      const commands = spec.phases[phase]!.commands ?? [];
      for (const [i, command] of commands.entries()) {
        lines.push(...`${at()} Running command ${command}`.split('\n'));
        if (phase !== 'build' || i !== commands.length - 1) continue;
        lines.push(...output);
        if (status === 'SUCCEEDED') continue;
        lines.push(...`${at()} Command did not exit successfully ${command} exit status 1`.split('\n'));
        lines.push(`${at()} Phase complete: ${name} State: FAILED`);
        lines.push(
          ...`${at()} Phase context status code: COMMAND_EXECUTION_ERROR Message: Error while executing command: ${command}. Reason: exit status 1`.split(
            '\n',
          ),
        );
        return lines;
      }
      lines.push(`${at()} Phase complete: ${name} State: SUCCEEDED`);
    }
    return lines;
  }

  /** Lines a running build logs, appended to its stream (readable before the build ends). */
  logBuild(id: string, logLines: string[]): void {
    const build = this.builds.find((b) => b.id === id);
    if (!build) throw new Error(`no build ${id}`);
    const stream = `${build.logs.groupName}/${build.logs.streamName}`;
    this.logEvents.set(stream, [...(this.logEvents.get(stream) ?? []), ...logLines]);
  }

  /**
   * Play a started build to its end: on success push an image for every entry of its `BUILDS`; record its
   * log lines; return the EventBridge event CodeBuild would emit (the caller delivers it to the target).
   */
  finishBuild(id: string, status: Exclude<StartedBuild['status'], 'IN_PROGRESS'>, logLines: string[] = []) {
    const build = this.builds.find((b) => b.id === id);
    if (!build) throw new Error(`no build ${id}`);
    build.status = status;
    this.logBuild(id, this.echoed(build, status, logLines));
    if (status === 'SUCCEEDED') {
      const repositoryName = build.env.IMAGE_REPOSITORY_URI!.split('/').slice(1).join('/');
      for (const b of JSON.parse(build.env.BUILDS ?? '[]') as { tag: string; commit?: string }[])
        this.pushImage(
          repositoryName,
          b.tag,
          b.commit ? { 'org.opencontainers.image.revision': b.commit } : {},
        );
    }
    const event: CodeBuildEvent = {
      version: '0',
      id: randomUUID(),
      'detail-type': 'CodeBuild Build State Change',
      source: 'aws.codebuild',
      account: ACCOUNT,
      time: new Date().toISOString(),
      region: REGION,
      resources: [`arn:aws:codebuild:${REGION}:${ACCOUNT}:build/${build.id}`],
      detail: {
        'build-status': status,
        'project-name': build.projectName,
        'build-id': `arn:aws:codebuild:${REGION}:${ACCOUNT}:build/${build.id}`,
        'additional-information': {
          environment: {
            'environment-variables': Object.entries(build.env).map(([name, value]) => ({
              name,
              value,
              type: 'PLAINTEXT',
            })),
          },
          logs: {
            'group-name': build.logs.groupName,
            'stream-name': build.logs.streamName,
            'deep-link': `https://console.aws.amazon.com/cloudwatch/home?region=${REGION}#logEvent:group=${build.logs.groupName}`,
          },
        },
      },
    };
    return event;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readAll(req);
    const target = req.headers['x-amz-target'];
    if (typeof target === 'string') {
      const [prefix, op] = target.split('.') as [string, string];
      const service = SERVICES[prefix];
      this.calls.push(`${service ?? prefix}.${op}`);
      try {
        const fault = this.faults.find((f) => f.remaining > 0 && f.operation === `${service}.${op}`);
        if (fault) {
          fault.remaining--;
          throw fault.error;
        }
        const hook = this.before.findIndex((b) => b.operation === `${service}.${op}`);
        if (hook >= 0) await this.before.splice(hook, 1)[0]!.run();
        const input = body.length ? (JSON.parse(body.toString('utf8')) as Record<string, any>) : {};
        const out = await this.json(service, op, input);
        res.writeHead(200, { 'content-type': jsonContentType(prefix) });
        res.end(JSON.stringify(out ?? {}));
      } catch (err) {
        if (!(err instanceof AwsError)) throw err;
        res.writeHead(err.status, {
          'content-type': jsonContentType(prefix),
          'x-amzn-errortype': err.type,
        });
        res.end(JSON.stringify({ __type: err.type, message: err.message }));
      }
      return;
    }
    if (this.eksLambda.handle(req, res, body)) return;
    this.s3(req, res, body);
  }

  private async json(service: string | undefined, op: string, input: Record<string, any>): Promise<unknown> {
    switch (`${service}.${op}`) {
      case 'SecretsManager.GetSecretValue': {
        const value = this.secrets.get(input.SecretId);
        if (value === undefined)
          throw new AwsError('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
        return { ARN: input.SecretId, Name: input.SecretId, SecretString: value };
      }
      case 'SecretsManager.PutSecretValue':
        if (!this.secrets.has(input.SecretId))
          throw new AwsError('ResourceNotFoundException', 'no such secret');
        this.secrets.set(input.SecretId, input.SecretString);
        return { ARN: input.SecretId };
      case 'SecretsManager.CreateSecret':
        if (this.secrets.has(input.Name)) throw new AwsError('ResourceExistsException', 'secret exists');
        this.secrets.set(input.Name, input.SecretString);
        return { ARN: input.Name, Name: input.Name };
      case 'SFN.StartExecution': {
        const name = String(input.stateMachineArn).split(':').pop() as WorkflowName;
        const { executionId } = await this.workflows.start(name, JSON.parse(input.input ?? '{}'), input.name);
        return { executionArn: executionId, startDate: Date.now() / 1000 };
      }
      case 'SFN.SendTaskSuccess':
      case 'SFN.SendTaskFailure': {
        if (!this.workflows.isWaiting(input.taskToken))
          throw new AwsError('TaskDoesNotExist', 'Task does not exist anymore');
        await this.workflows.completeTask(
          input.taskToken,
          op === 'SendTaskSuccess'
            ? { ok: true, output: JSON.parse(input.output) }
            : { ok: false, error: input.error ?? 'States.TaskFailed', cause: input.cause ?? '' },
        );
        return {};
      }
      case 'SFN.SendTaskHeartbeat':
        if (!this.workflows.isWaiting(input.taskToken))
          throw new AwsError('TaskDoesNotExist', 'Task does not exist anymore');
        await this.workflows.heartbeat(input.taskToken);
        return {};
      case 'CodeBuild.StartBuild': {
        const id = `${input.projectName}:${randomUUID()}`;
        const env = Object.fromEntries(
          ((input.environmentVariablesOverride ?? []) as { name: string; value: string }[]).map((v) => [
            v.name,
            v.value,
          ]),
        );
        const build: StartedBuild = {
          id,
          projectName: input.projectName,
          env,
          status: 'IN_PROGRESS',
          logs: {
            groupName: this.projectLogGroups.get(input.projectName) ?? `/aws/codebuild/${input.projectName}`,
            streamName: id.split(':')[1]!,
          },
        };
        this.builds.push(build);
        return {
          build: {
            id,
            arn: `arn:aws:codebuild:${REGION}:${ACCOUNT}:build/${id}`,
            buildStatus: 'IN_PROGRESS',
          },
        };
      }
      case 'ECR.BatchGetImage': {
        const images: unknown[] = [];
        const failures: unknown[] = [];
        for (const imageId of input.imageIds as { imageTag: string }[]) {
          const digest = this.images.get(`${input.repositoryName}:${imageId.imageTag}`);
          if (digest)
            images.push({
              repositoryName: input.repositoryName,
              imageId: { imageTag: imageId.imageTag, imageDigest: digest },
              imageManifest: this.manifests.get(digest),
              imageManifestMediaType: 'application/vnd.oci.image.manifest.v1+json',
            });
          else
            failures.push({
              imageId,
              failureCode: 'ImageNotFound',
              failureReason: 'Requested image not found',
            });
        }
        return { images, failures };
      }
      case 'Logs.GetLogEvents': {
        const lines = this.logEvents.get(`${input.logGroupName}/${input.logStreamName}`);
        if (!lines)
          throw new AwsError('ResourceNotFoundException', 'The specified log stream does not exist.');
        const limited = input.limit ? lines.slice(-input.limit) : lines;
        return { events: limited.map((message, i) => ({ timestamp: Date.now() + i, message })) };
      }
      case 'EventBridge.PutEvents': {
        const entries = input.Entries as unknown[];
        this.events.push(...entries);
        return { FailedEntryCount: 0, Entries: entries.map(() => ({ EventId: randomUUID() })) };
      }
      default:
        throw new AwsError('UnknownOperationException', `the fake does not implement ${service}.${op}`);
    }
  }

  private s3(req: IncomingMessage, res: ServerResponse, raw: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://s3');
    const key = decodeURIComponent(url.pathname.slice(1));
    this.calls.push(`S3.${req.method} /${key}`);
    const object = this.objects.get(key);
    if (this.s3Multipart(req, res, url, key, raw)) return;
    if (req.method === 'PUT') {
      const encoding = String(req.headers['content-encoding'] ?? '');
      const body = encoding.includes('aws-chunked') ? decodeAwsChunked(raw) : raw;
      const contentType = req.headers['content-type'];
      this.objects.set(key, { body, contentType });
      res.writeHead(200, { etag: `"${createHash('md5').update(body).digest('hex')}"` });
      res.end();
      return;
    }
    if (req.method === 'HEAD' || req.method === 'GET') {
      if (!object) {
        res.writeHead(404, { 'content-type': 'application/xml' });
        res.end(
          req.method === 'GET'
            ? '<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>'
            : undefined,
        );
        return;
      }
      res.writeHead(200, {
        'content-length': String(object.body.length),
        'content-type': object.contentType ?? 'application/octet-stream',
        etag: `"${createHash('md5').update(object.body).digest('hex')}"`,
      });
      res.end(req.method === 'GET' ? object.body : undefined);
      return;
    }
    res.writeHead(405, { 'content-type': 'application/xml' });
    res.end('<Error><Code>MethodNotAllowed</Code></Error>');
  }

  /** The multipart-upload operations (query `uploads` or `uploadId`); false for any other request. */
  private s3Multipart(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    key: string,
    raw: Buffer,
  ): boolean {
    const xml = (status: number, body: string) => {
      res.writeHead(status, { 'content-type': 'application/xml' });
      res.end(body);
      return true;
    };
    const etag = (body: Buffer) => `"${createHash('md5').update(body).digest('hex')}"`;
    if (req.method === 'POST' && url.searchParams.has('uploads')) {
      const id = randomUUID();
      this.uploads.set(id, { key, contentType: req.headers['content-type'], parts: new Map() });
      return xml(
        200,
        `<InitiateMultipartUploadResult><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`,
      );
    }
    const id = url.searchParams.get('uploadId');
    if (id === null) return false;
    const upload = this.uploads.get(id);
    if (!upload || upload.key !== key)
      return xml(
        404,
        '<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>',
      );
    if (req.method === 'PUT') {
      const n = Number(url.searchParams.get('partNumber'));
      const encoding = String(req.headers['content-encoding'] ?? '');
      const part = encoding.includes('aws-chunked') ? decodeAwsChunked(raw) : raw;
      upload.parts.set(n, part);
      res.writeHead(200, { etag: etag(part) });
      res.end();
      return true;
    }
    if (req.method === 'DELETE') {
      this.uploads.delete(id);
      res.writeHead(204);
      res.end();
      return true;
    }
    if (req.method === 'POST') {
      // Each <Part> names its PartNumber and ETag (and, from the SDK, its checksum) in any order.
      const text = (part: string, tag: string) => new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(part)?.[1];
      const listed = [...raw.toString('utf8').matchAll(/<Part>([\s\S]*?)<\/Part>/g)].map(([, p]) => p!);
      const parts = listed.map((part) => ({
        body: upload.parts.get(Number(text(part, 'PartNumber'))),
        tag: (text(part, 'ETag') ?? '').replace(/&quot;/g, '"'),
      }));
      if (!parts.length || parts.some((p) => !p.body || etag(p.body) !== p.tag))
        return xml(
          400,
          '<Error><Code>InvalidPart</Code><Message>One or more of the specified parts could not be found.</Message></Error>',
        );
      const body = Buffer.concat(parts.map((p) => p.body!));
      this.objects.set(key, { body, contentType: upload.contentType });
      this.uploads.delete(id);
      return xml(
        200,
        `<CompleteMultipartUploadResult><Key>${key}</Key><ETag>${etag(body)}</ETag></CompleteMultipartUploadResult>`,
      );
    }
    return false;
  }
}

/** JSON `X-Amz-Target` prefixes of the services above. */
const SERVICES: Record<string, string> = {
  secretsmanager: 'SecretsManager',
  AWSStepFunctions: 'SFN',
  CodeBuild_20161006: 'CodeBuild',
  AmazonEC2ContainerRegistry_V20150921: 'ECR',
  Logs_20140328: 'Logs',
  AWSEvents: 'EventBridge',
};

/** The content type a JSON-protocol service answers with: Step Functions speaks JSON 1.0, the others 1.1. */
function jsonContentType(targetPrefix: string): string {
  return `application/x-amz-json-${targetPrefix === 'AWSStepFunctions' ? '1.0' : '1.1'}`;
}

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** The payload of an `aws-chunked` body: `<hex size>[;ext]\r\n<data>\r\n` … `0\r\n<trailers>\r\n\r\n`. */
function decodeAwsChunked(raw: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < raw.length) {
    const eol = raw.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = Number.parseInt(raw.subarray(at, eol).toString('latin1').split(';')[0]!, 16);
    if (!size) break;
    parts.push(raw.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(parts);
}
