import { type CloudWatchLogsClient, GetLogEventsCommand } from '@aws-sdk/client-cloudwatch-logs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../../manifest/tables.js';
import { isAwsError } from '../../../shared/aws/aws-errors.js';
import { ddb, table } from '../../../shared/aws/dynamo.js';
import type { AppLogs, LogQuery, LogTarget, LogText } from '../port.js';

/** GetLogEvents answers at most this many events. */
const MAX_LOG_EVENTS = 10_000;
/**
 * Events asked for beyond the lines wanted, for CodeBuild's own lines that are left out: it writes about
 * two per phase and per command it runs (each phase runs one script file), some twenty in a build.
 */
const CODEBUILD_LINES_MARGIN = 100;

/**
 * A line CodeBuild wrote itself (`[Container] 2026/11/28 17:50:01.123456 Running command bash …`, its
 * phases and their verdicts), not the build's own output: the build log and a failure's cause skip it.
 */
export const isCodeBuildLine = (line: string): boolean => line.startsWith('[Container] ');

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
export class BuildLogs implements AppLogs {
  /** `client`: the container's CloudWatch Logs client (registry/aws-clients.ts). */
  constructor(private readonly client: CloudWatchLogsClient) {}

  /**
   * The end of an app's latest image build log (CloudWatch Logs `GetLogEvents`, newest events), the lines
   * the build printed itself (CodeBuild's `[Container]` lines left out: `isCodeBuildLine`): undefined when
   * no build of it is known or its stream does not exist (yet, or any more). Builds get no secret bundle,
   * so a build log holds no secret values of it; the caller masks anyway.
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
    const limit = Math.min(query.tailLines + CODEBUILD_LINES_MARGIN, MAX_LOG_EVENTS);
    let events: { message?: string }[];
    try {
      const out = await this.client.send(
        new GetLogEventsCommand({
          logGroupName: pointer.logGroup,
          logStreamName: pointer.logStream,
          limit,
          startFromHead: false,
        }),
      );
      events = out.events ?? [];
    } catch (err) {
      if (isAwsError(err, 'ResourceNotFoundException')) return undefined;
      throw err;
    }
    const own = events.map((e) => (e.message ?? '').replace(/\r?\n$/, '')).filter((l) => !isCodeBuildLine(l));
    const lines = own.slice(-query.tailLines);
    let truncated = events.length >= limit || own.length > lines.length;
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
