/**
 * The two AWS APIs the EKS runtime calls besides the Kubernetes API, faked for the cloud simulation tier
 * and the adapter's tests. Test support code, not product. (The functions get the cluster's API from the
 * stack, EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA; DescribeCluster is the CLI's lookup,
 * eks/describe.ts. Invoke is the rollout watcher's, eks/lambda-invoke.ts; both through their SDK clients.)
 *
 * - EKS `DescribeCluster` (REST-JSON, not `X-Amz-Target`): `GET /clusters/{name}` answers
 *   `{ cluster: { name, arn, endpoint, certificateAuthority: { data }, status: 'ACTIVE', version } }` for a
 *   cluster registered with `addCluster` (a FakeKubernetes: its URL and CA); an unknown name is a 404
 *   `ResourceNotFoundException`.
 * - Lambda `Invoke` (REST-JSON): `POST /2015-03-31/functions/{name}/invocations`. `InvocationType: Event`
 *   (header `X-Amz-Invocation-Type`) answers 202 at once and runs the registered function after the
 *   response (as Lambda's async queue would, without its retries); `RequestResponse` runs it and answers
 *   200 with its JSON result. An unknown function is a 404 `ResourceNotFoundException`.
 * Signatures are not checked. Nothing else is implemented.
 *
 * Plug it into test/cloud/fakes/aws.ts's `handle` (which routes JSON-1.x calls by `X-Amz-Target` and
 * everything else to S3) before the S3 fallback: `if (this.eksLambda.handle(req, res, body)) return;`. It
 * claims a request by its SigV4 credential scope (`/eks/aws4_request` or `/lambda/aws4_request` in the
 * Authorization header), so S3 paths are never taken; then `AWS_ENDPOINT_URL_EKS` and
 * `AWS_ENDPOINT_URL_LAMBDA` go to the same URL. Or run it alone with `start()`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const ACCOUNT = '000000000000';

export type LambdaFunction = (event: unknown) => Promise<unknown>;

/** Which service a SigV4-signed request is for (from its credential scope), if any. */
export function signingServiceOf(req: IncomingMessage): string | undefined {
  const auth = String(req.headers.authorization ?? '');
  return /Credential=[^/]+\/\d{8}\/[^/]+\/([^/]+)\/aws4_request/.exec(auth)?.[1];
}

export class FakeEksAndLambda {
  url = '';
  /** Every call, as `EKS.DescribeCluster name` or `Lambda.Invoke name (Event)`. */
  readonly calls: string[] = [];
  /** Async invocations still running (`settled()` waits for them). */
  private readonly running = new Set<Promise<unknown>>();
  private readonly clusters = new Map<string, { url: string; caData: string }>();
  private readonly functions = new Map<string, LambdaFunction>();
  private server?: Server;

  constructor(private readonly region = 'eu-west-1') {}

  addCluster(name: string, api: { url: string; caData: string }): this {
    this.clusters.set(name, api);
    return this;
  }

  /** Register a function by name (an ARN naming it works too). */
  addFunction(name: string, fn: LambdaFunction): this {
    this.functions.set(name, fn);
    return this;
  }

  /** Every async invocation started so far, and those they start, have finished. */
  async settled(): Promise<void> {
    while (this.running.size) await Promise.allSettled([...this.running]);
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (!this.handle(req, res, Buffer.concat(chunks))) {
          res.writeHead(400, {
            'content-type': 'application/json',
            'x-amzn-errortype': 'UnknownOperationException',
          });
          res.end(JSON.stringify({ message: `the fake does not implement ${req.method} ${req.url}` }));
        }
      });
    });
    await new Promise<void>((ok) => this.server!.listen(0, '127.0.0.1', () => ok()));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await this.settled();
    await new Promise<void>((done) => {
      if (!this.server) return done();
      this.server.close(() => done());
      this.server.closeAllConnections();
    });
  }

  /** Answer an EKS or Lambda call; false when the request is neither (the caller routes it elsewhere). */
  handle(req: IncomingMessage, res: ServerResponse, body: Buffer): boolean {
    const service = signingServiceOf(req);
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const error = (status: number, type: string, message: string) => {
      res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-errortype': type });
      res.end(JSON.stringify({ message }));
    };
    if (service === 'eks') {
      const m = /^\/clusters\/([^/]+)$/.exec(path);
      if (req.method !== 'GET' || !m) {
        error(400, 'UnknownOperationException', `the fake does not implement EKS ${req.method} ${path}`);
        return true;
      }
      const name = decodeURIComponent(m[1]!);
      this.calls.push(`EKS.DescribeCluster ${name}`);
      const api = this.clusters.get(name);
      if (!api) {
        error(404, 'ResourceNotFoundException', `No cluster found for name: ${name}.`);
        return true;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          cluster: {
            name,
            arn: `arn:aws:eks:${this.region}:${ACCOUNT}:cluster/${name}`,
            endpoint: api.url,
            certificateAuthority: { data: api.caData },
            status: 'ACTIVE',
            version: '1.31',
          },
        }),
      );
      return true;
    }
    if (service === 'lambda') {
      const m = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/.exec(path);
      if (req.method !== 'POST' || !m) {
        error(400, 'UnknownOperationException', `the fake does not implement Lambda ${req.method} ${path}`);
        return true;
      }
      const name = decodeURIComponent(m[1]!).split(':').at(-1)!;
      const fn = this.functions.get(name);
      const type = String(req.headers['x-amz-invocation-type'] ?? 'RequestResponse');
      this.calls.push(`Lambda.Invoke ${name} (${type})`);
      if (!fn) {
        error(
          404,
          'ResourceNotFoundException',
          `Function not found: arn:aws:lambda:${this.region}:${ACCOUNT}:function:${name}`,
        );
        return true;
      }
      const event = body.length ? JSON.parse(body.toString('utf8')) : {};
      if (type === 'Event') {
        res.writeHead(202, { 'content-type': 'application/json' });
        res.end();
        const run = new Promise((r) => setImmediate(r)).then(() => fn(event));
        const tracked = run.catch(() => undefined).finally(() => this.running.delete(tracked));
        this.running.add(tracked);
        return true;
      }
      fn(event).then(
        (out) => {
          res.writeHead(200, { 'content-type': 'application/json', 'x-amz-executed-version': '$LATEST' });
          res.end(JSON.stringify(out ?? null));
        },
        (err: Error) => {
          res.writeHead(200, { 'content-type': 'application/json', 'x-amz-function-error': 'Unhandled' });
          res.end(JSON.stringify({ errorType: err.name, errorMessage: err.message }));
        },
      );
      return true;
    }
    return false;
  }
}
