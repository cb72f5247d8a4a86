import { readFileSync } from 'node:fs';
import { githubOutboxPath, type OutboxLine } from '../../functions/ports/pr-status/local-outbox.js';

/*
 * The merge gate's check runs as the local server's GitHub outbox records them (every POST and PATCH of
 * `/check-runs`, with its body): read by the gate's integration tests.
 */

/** Every GitHub call the local server made, oldest first (none before the first). */
export function outbox(dataDir: string): OutboxLine[] {
  try {
    return readFileSync(githubOutboxPath(dataDir), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as OutboxLine);
  } catch {
    return [];
  }
}

export interface CheckRunCalls {
  id: number;
  /** Its POST, then its PATCHes. */
  calls: OutboxLine[];
}

/** Every check run of a head commit, oldest first. */
export function checkRuns(dataDir: string, sha: string): CheckRunCalls[] {
  const lines = outbox(dataDir);
  return lines
    .filter((l) => l.method === 'POST' && l.path.endsWith('/check-runs') && l.body.head_sha === sha)
    .map((post) => ({
      id: post.response.id!,
      calls: [
        post,
        ...lines.filter((l) => l.method === 'PATCH' && l.path.endsWith(`/check-runs/${post.response.id}`)),
      ],
    }));
}

export const lastCall = (run: CheckRunCalls): OutboxLine => run.calls[run.calls.length - 1]!;
export const outputOf = (line: OutboxLine) =>
  line.body.output as { title: string; summary: string; text?: string };

/** Wait until the head has `count` check runs and the last one completed; that one's last call. */
export async function completedCheckRun(
  dataDir: string,
  sha: string,
  count = 1,
  timeoutMs = 120_000,
): Promise<OutboxLine> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const runs = checkRuns(dataDir, sha);
    const last = runs[count - 1];
    if (last && lastCall(last).body.status === 'completed') return lastCall(last);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no completed check run #${count} for ${sha}: ${JSON.stringify(checkRuns(dataDir, sha))}`);
}
