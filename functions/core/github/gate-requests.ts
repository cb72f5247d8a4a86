import * as z from 'zod/mini';
import { ValidationError } from '../../shared/errors.js';
import { describeIssues, MAX_PR, repoFullName, rowId } from '../../shared/validation.js';

/*
 * What the merge gate hears from the pull request (core/gate/): GitHub's re-run button on the check run
 * (`check_run` `rerequested`), its `Re-run failed tests` button (`check_run` `requested_action`, identifier
 * `rerun-failed`), and a `/preview skip-tests <reason>` comment (`issue_comment` `created` on a pull
 * request) from someone the repository trusts (`author_association` OWNER, MEMBER or COLLABORATOR; anyone
 * else's is ignored). Each becomes one `Merge Gate Requested` event per acting organization.
 */

/** The check run's name the gate creates (core/gate/gate.ts CHECK_RUN_NAME). */
const CHECK_RUN_NAME = 'Preview tests';
export const SKIP_COMMAND = '/preview skip-tests';
const TRUSTED = ['OWNER', 'MEMBER', 'COLLABORATOR'];

const sha = z.string().check(z.regex(/^[0-9a-f]{40}$/i, 'must be a 40-digit commit SHA'));
const nonEmpty = z.string().check(z.minLength(1));
const prNumber = z.number().check(z.int(), z.gte(1), z.lte(MAX_PR));
const repository = z.object({ full_name: repoFullName });
const installation = z.optional(z.object({ id: z.number().check(z.int(), z.gt(0)) }));
const login = z.string().check(z.minLength(1), z.maxLength(255));

const checkRunPayload = z.object({
  action: nonEmpty,
  check_run: z.object({
    id: z.number().check(z.int(), z.gt(0)),
    name: nonEmpty,
    head_sha: sha,
    external_id: z.optional(z.nullable(z.string().check(z.maxLength(255)))),
    pull_requests: z.optional(z.array(z.object({ number: prNumber })).check(z.maxLength(100))),
  }),
  requested_action: z.optional(z.object({ identifier: z.string().check(z.maxLength(100)) })),
  sender: z.optional(z.object({ login })),
  repository,
  installation,
});

const issueCommentPayload = z.object({
  action: nonEmpty,
  issue: z.object({ number: prNumber, pull_request: z.optional(z.unknown()) }),
  comment: z.object({
    body: z.string().check(z.maxLength(65_536)),
    author_association: nonEmpty,
    user: z.object({ login }),
  }),
  repository,
  installation,
});

/** A gate request, before the service knows for whom. */
export type GateRequest = {
  kind: 'gateRequested';
  repoFullName: string;
  installationId?: number;
  prNumber: number;
  request:
    | { action: 'rerun' | 'rerun-failed'; headSha: string; by?: string }
    | { action: 'skip'; by: string; reason: string };
};

function parse<T extends z.core.$ZodType>(schema: T, payload: unknown, event: string): z.infer<T> {
  const parsed = z.safeParse(schema, payload);
  if (!parsed.success) throw new ValidationError(describeIssues(`${event} payload`, parsed.error));
  return parsed.data;
}

/**
 * The pull request a check run of ours belongs to: its `external_id` (`<tag>:<owner/repo>#<pr>@<sha>/<story>`,
 * or `<pr>/<story>` on check runs created before it named more), else GitHub's list.
 */
function prOf(run: z.infer<typeof checkRunPayload>['check_run']): number | undefined {
  const id = run.external_id ?? '';
  const ours = /^(\d+)\/\d+$/.exec(id) ?? /^[0-9a-f]{12}:[^#]+#(\d+)@[0-9a-f]{40}\/\d+$/.exec(id);
  if (ours) return Number(ours[1]);
  return run.pull_requests?.[0]?.number;
}

/** A `check_run` or `issue_comment` delivery as a gate request, or why it is none. */
export function normalizeGateDelivery(event: string, payload: unknown): GateRequest | { ignored: string } {
  if (event === 'check_run') {
    const action = (payload as { action?: unknown } | null)?.action;
    if (action !== 'rerequested' && action !== 'requested_action')
      return { ignored: `check_run action "${String(action)}" asks nothing of the gate` };
    const p = parse(checkRunPayload, payload, 'check_run');
    if (p.check_run.name !== CHECK_RUN_NAME)
      return { ignored: `check run "${p.check_run.name}" is not the merge gate's` };
    const pr = prOf(p.check_run);
    if (pr === undefined) return { ignored: 'the check run names no pull request' };
    if (p.action === 'requested_action' && p.requested_action?.identifier !== 'rerun-failed')
      return {
        ignored: `requested action "${p.requested_action?.identifier ?? ''}" is not one of the gate's`,
      };
    return {
      kind: 'gateRequested',
      repoFullName: p.repository.full_name,
      installationId: p.installation?.id,
      prNumber: pr,
      request: {
        action: p.action === 'rerequested' ? 'rerun' : 'rerun-failed',
        headSha: p.check_run.head_sha.toLowerCase(),
        ...(p.sender ? { by: p.sender.login } : {}),
      },
    };
  }
  // issue_comment
  const action = (payload as { action?: unknown } | null)?.action;
  if (action !== 'created') return { ignored: `issue_comment action "${String(action)}" asks nothing` };
  const p = parse(issueCommentPayload, payload, 'issue_comment');
  const body = p.comment.body.trim();
  if (body !== SKIP_COMMAND && !body.startsWith(`${SKIP_COMMAND} `) && !body.startsWith(`${SKIP_COMMAND}\n`))
    return { ignored: 'the comment is no /preview command' };
  if (p.issue.pull_request === undefined)
    return { ignored: 'the comment is on an issue, not a pull request' };
  if (!TRUSTED.includes(p.comment.author_association))
    return {
      ignored: `${p.comment.user.login} (${p.comment.author_association}) may not skip the tests: only an owner, member or collaborator may`,
    };
  return {
    kind: 'gateRequested',
    repoFullName: p.repository.full_name,
    installationId: p.installation?.id,
    prNumber: p.issue.number,
    request: {
      action: 'skip',
      by: p.comment.user.login,
      // The first line after the command: the reason (empty: refused by a reply comment).
      reason: body.slice(SKIP_COMMAND.length).trim().split('\n')[0]!.trim().slice(0, 500),
    },
  };
}

/** The `Merge Gate Requested` event's detail (core/gate/requests.ts acts on it). */
export const gateRequestedDetail = z.object({
  orgId: rowId,
  repoFullName,
  prNumber,
  deliveryId: z.optional(z.string()),
  request: z.union([
    z.object({
      action: z.enum(['rerun', 'rerun-failed']),
      headSha: sha,
      by: z.optional(login),
    }),
    z.object({ action: z.literal('skip'), by: login, reason: z.string().check(z.maxLength(500)) }),
  ]),
});
export type GateRequestedDetail = z.infer<typeof gateRequestedDetail>;
