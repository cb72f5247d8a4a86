import { keys } from '../../manifest/tables.js';
import { type AwsJsonClient, isAwsError } from '../../shared/aws-json.js';
import { ddb, table } from '../../shared/dynamo.js';
import { GetCommand } from '../../shared/dynamo-document.js';
import type { LogQuery, LogTarget, LogText } from './port.js';

/** GetLogEvents answers at most this many events. */
const MAX_LOG_EVENTS = 10_000;

/** CloudWatch Logs `GetLogEvents`, as far as it is sent and read here (the wire JSON). */
export interface GetLogEventsInput {
  logGroupName: string;
  logStreamName: string;
  limit?: number;
  startFromHead?: boolean;
}
export interface GetLogEventsOutput {
  /** `timestamp`/`ingestionTime` are epoch milliseconds (numbers, as in the SDK's output). */
  events?: { timestamp?: number; message?: string; ingestionTime?: number }[];
  nextForwardToken?: string;
  nextBackwardToken?: string;
}

/** `GetLogEvents` on a CloudWatch Logs client (shared/aws-json.ts `CLOUDWATCH_LOGS`). */
export function getLogEvents(client: AwsJsonClient, input: GetLogEventsInput): Promise<GetLogEventsOutput> {
  return client.call<GetLogEventsOutput>('GetLogEvents', input);
}

/** Where an app's latest build logs (table `builds`, key `keys.builds.latestLog`): one CodeBuild stream. */
export interface LogPointer {
  buildId: string;
  codebuildId?: string;
  logGroup?: string;
  logStream?: string;
  expiresAt: number;
}

/**
 * Reading the image builds' logs (CloudWatch Logs, where CodeBuild writes them), apart from starting
 * builds: all that the app-logs route needs of the image half of the cloud runtime, so its bundle carries
 * the CloudWatch Logs client and not CodeBuild's or ECR's. `CodeBuildImages` writes the pointers.
 */
export class BuildLogs {
  /** `client`: a CloudWatch Logs client (`new AwsJsonClient(CLOUDWATCH_LOGS, …)`). */
  constructor(private readonly client: AwsJsonClient) {}

  /**
   * The end of an app's latest image build log (CloudWatch Logs `GetLogEvents`, newest events): undefined
   * when no build of it is known or its stream does not exist (yet, or any more). Builds get no secret
   * bundle, so a build log holds no secret values of it; the caller masks anyway.
   */
  async logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    const { Item } = await ddb().send(
      new GetCommand({
        TableName: table('builds'),
        Key: { buildId: keys.builds.latestLog(target.orgId, target.envKey, app) },
      }),
    );
    const pointer = Item as LogPointer | undefined;
    if (!pointer?.logGroup || !pointer.logStream) return undefined;
    const limit = Math.min(query.tailLines, MAX_LOG_EVENTS);
    let events: { message?: string }[];
    try {
      const out = await getLogEvents(this.client, {
        logGroupName: pointer.logGroup,
        logStreamName: pointer.logStream,
        limit,
        startFromHead: false,
      });
      events = out.events ?? [];
    } catch (err) {
      if (isAwsError(err, 'ResourceNotFoundException')) return undefined;
      throw err;
    }
    const lines = events.map((e) => (e.message ?? '').replace(/\r?\n$/, ''));
    let truncated = events.length >= limit;
    let bytes = 0;
    let from = lines.length;
    while (from > 0 && bytes + Buffer.byteLength(lines[from - 1]!) + 1 <= query.maxBytes) {
      from--;
      bytes += Buffer.byteLength(lines[from]!) + 1;
    }
    if (from > 0) truncated = true;
    const kept = lines.slice(from);
    return { text: kept.length ? `${kept.join('\n')}\n` : '', truncated };
  }
}
