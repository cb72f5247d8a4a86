import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import { ddb, isConditionFailure, queryItems, table } from '../../shared/aws/dynamo.js';
import { ConflictError, NotFoundError, ValidationError } from '../../shared/errors.js';
import { findTest } from '../test-definitions/index.js';

/*
 * Quarantine: a flaky `run_on_preview` test whose failure does not fail the merge gate for a while. Each
 * quarantine has an owner, a reason and an end (`until`, at most 30 days ahead); the test still runs and
 * the check run still reports it, and once `until` passes its failures count again with nothing to undo.
 * At most a fifth of an application's `run_on_preview` tests (at least one) may be quarantined at once,
 * so a quarantine cannot quietly switch the gate off.
 *
 * One item per application in the `tenancy` table (`keys.gates.quarantine`): its map of test ids and a
 * revision every write is conditioned on, so two quarantines at once cannot both pass the cap.
 */

/** The longest a quarantine may last, and what one lasts when no end is given. */
export const QUARANTINE_MAX_DAYS = 30;
/** The share of an application's `run_on_preview` tests that may be quarantined at once. */
export const QUARANTINE_SHARE = 0.2;

const DAY_MS = 24 * 60 * 60 * 1000;

export interface QuarantineEntry {
  owner: string;
  reason: string;
  /** When the quarantine ends (ISO 8601). */
  until: string;
  /** When it began. */
  since: string;
}

interface QuarantineItem {
  pk: string;
  orgId: string;
  applicationId: string;
  tests: Record<string, QuarantineEntry>;
  rev: number;
}

/** What callers see of one quarantine. */
export interface QuarantineView {
  test_id: string;
  test_name: string;
  application_id: string;
  owner: string;
  reason: string;
  until: string;
  since: string;
}

/** How many tests of an application with `previewTests` run_on_preview tests may be quarantined at once. */
export const quarantineCap = (previewTests: number): number =>
  Math.max(1, Math.floor(previewTests * QUARANTINE_SHARE));

/** Whether `entry` still holds at `at`. */
export const holds = (entry: Pick<QuarantineEntry, 'until'> | undefined, at: Date | string): boolean =>
  entry !== undefined && Date.parse(entry.until) > new Date(at).getTime();

async function loadItem(orgId: string, applicationId: string): Promise<QuarantineItem | undefined> {
  const { Item } = await ddb().send(
    new GetCommand({
      TableName: table('tenancy'),
      Key: { pk: keys.gates.quarantine(orgId, applicationId) },
      ConsistentRead: true,
    }),
  );
  return Item as QuarantineItem | undefined;
}

/** The quarantines of an item still holding at `now`. */
const active = (item: QuarantineItem | undefined, now: Date): Record<string, QuarantineEntry> =>
  Object.fromEntries(Object.entries(item?.tests ?? {}).filter(([, e]) => holds(e, now)));

/** Write the item's map, only if nobody wrote it since `rev` was read. */
async function writeItem(
  orgId: string,
  applicationId: string,
  tests: Record<string, QuarantineEntry>,
  rev: number | undefined,
): Promise<void> {
  await ddb().send(
    new PutCommand({
      TableName: table('tenancy'),
      Item: {
        pk: keys.gates.quarantine(orgId, applicationId),
        orgId,
        applicationId,
        tests,
        rev: (rev ?? 0) + 1,
      },
      ConditionExpression: rev === undefined ? 'attribute_not_exists(pk)' : 'rev = :rev',
      ...(rev === undefined ? {} : { ExpressionAttributeValues: { ':rev': rev } }),
    }),
  );
}

/** The end a request asks for: a date or date-time, after now and at most 30 days ahead (default: 30). */
export function quarantineEnd(until: string | undefined, now: Date): string {
  const max = now.getTime() + QUARANTINE_MAX_DAYS * DAY_MS;
  if (until === undefined) return new Date(max).toISOString();
  const at = /^\d{4}-\d{2}-\d{2}$/.test(until) ? Date.parse(`${until}T23:59:59Z`) : Date.parse(until);
  if (!Number.isFinite(at))
    throw new ValidationError('until: must be a date (YYYY-MM-DD) or an ISO 8601 time');
  if (at <= now.getTime()) throw new ValidationError('until: must be in the future');
  // A date names its whole day: the day 30 days from now is allowed.
  const limit = /^\d{4}-\d{2}-\d{2}$/.test(until) ? max + DAY_MS : max;
  if (at > limit)
    throw new ValidationError(
      `until: a quarantine lasts at most ${QUARANTINE_MAX_DAYS} days (until ${new Date(max).toISOString().slice(0, 10)})`,
    );
  return new Date(at).toISOString();
}

/** The test, checked to be one of the caller's `run_on_preview` tests with an application. */
async function previewTest(orgId: string, testId: string) {
  const test = await findTest(orgId, testId);
  if (!test.runOnPreview || !test.applicationId)
    throw new ConflictError(
      'only a run_on_preview test of an application can be quarantined: its failures are what the merge gate reads',
    );
  return { test, applicationId: test.applicationId };
}

/** How many `run_on_preview` tests an application has (its `previewTestIds`). */
async function previewTestsOf(applicationId: string): Promise<number> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('applications'), Key: { applicationId }, ConsistentRead: true }),
  );
  return ((Item as { previewTestIds?: Set<string> } | undefined)?.previewTestIds?.size ?? 0) || 1;
}

const view = (
  testId: string,
  testName: string,
  applicationId: string,
  e: QuarantineEntry,
): QuarantineView => ({
  test_id: testId,
  test_name: testName,
  application_id: applicationId,
  owner: e.owner,
  reason: e.reason,
  until: e.until,
  since: e.since,
});

/**
 * Quarantine a test (PUT /test/{test_id}/quarantine). Steps: the test must be the caller's (else 404)
 * and a `run_on_preview` test of an application (else 409); work out its end (400 past 30 days); read
 * the application's quarantines, dropping the ended ones; refuse past the cap (409: the test already
 * quarantined is replaced, not counted twice); write, conditioned on the revision read (a writer that
 * raced this one makes it read again).
 */
export async function quarantineTest(
  orgId: string,
  testId: string,
  input: { owner: string; reason: string; until?: string },
  now = new Date(),
): Promise<QuarantineView> {
  const { test, applicationId } = await previewTest(orgId, testId);
  const until = quarantineEnd(input.until, now);
  const cap = quarantineCap(await previewTestsOf(applicationId));
  for (let attempt = 0; attempt < 5; attempt++) {
    const item = await loadItem(orgId, applicationId);
    const tests = active(item, now);
    const others = Object.keys(tests).filter((id) => id !== testId);
    if (others.length >= cap)
      throw new ConflictError(
        `at most ${cap} of this application's run_on_preview tests may be quarantined at once ` +
          `(a fifth, at least one); quarantined now: ${others.join(', ')}`,
      );
    const entry: QuarantineEntry = {
      owner: input.owner,
      reason: input.reason,
      until,
      since: now.toISOString(),
    };
    try {
      await writeItem(orgId, applicationId, { ...tests, [testId]: entry }, item?.rev);
      return view(testId, test.name, applicationId, entry);
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
  }
  throw new ConflictError('the quarantines of this application changed while writing; try again');
}

/** End a test's quarantine now (DELETE /test/{test_id}/quarantine): 404 when it is not quarantined. */
export async function unquarantineTest(
  orgId: string,
  testId: string,
  now = new Date(),
): Promise<QuarantineView> {
  const test = await findTest(orgId, testId);
  if (!test.applicationId) throw new NotFoundError('the test is not quarantined');
  for (let attempt = 0; attempt < 5; attempt++) {
    const item = await loadItem(orgId, test.applicationId);
    const tests = active(item, now);
    const entry = tests[testId];
    if (!item || !entry) throw new NotFoundError('the test is not quarantined');
    delete tests[testId];
    try {
      await writeItem(orgId, test.applicationId, tests, item.rev);
      return view(testId, test.name, test.applicationId, entry);
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
  }
  throw new ConflictError('the quarantines of this application changed while writing; try again');
}

/** The organization's quarantines still holding (GET /quarantine), optionally of one application. */
export async function listQuarantined(
  orgId: string,
  opts: { applicationId?: string } = {},
  now = new Date(),
): Promise<QuarantineView[]> {
  const appIds: string[] = [];
  if (opts.applicationId !== undefined) appIds.push(opts.applicationId);
  else
    for await (const app of queryItems<{ applicationId: string }>({
      TableName: table('applications'),
      IndexName: 'byOrg',
      KeyConditionExpression: 'orgId = :o',
      ExpressionAttributeValues: { ':o': orgId },
    }))
      appIds.push(app.applicationId);
  const out: QuarantineView[] = [];
  for (const applicationId of appIds) {
    const item = await loadItem(orgId, applicationId);
    if (!item || item.orgId !== orgId) continue;
    for (const [testId, entry] of Object.entries(active(item, now)).sort(([a], [b]) => a.localeCompare(b))) {
      const name = await findTest(orgId, testId).then(
        (t) => t.name,
        () => testId,
      );
      out.push(view(testId, name, applicationId, entry));
    }
  }
  return out;
}

/**
 * The quarantines of some applications (what the gate reads, from the runs' `applicationId`s: the table
 * `tenancy` only): test id → its entry, ended ones included until the next write drops them (a run is
 * judged by whether its quarantine held when it ended).
 */
export async function quarantinesOf(
  orgId: string,
  applicationIds: Iterable<string>,
): Promise<Map<string, QuarantineEntry>> {
  const out = new Map<string, QuarantineEntry>();
  for (const applicationId of new Set(applicationIds)) {
    const item = await loadItem(orgId, applicationId);
    if (item?.orgId !== orgId) continue;
    for (const [testId, entry] of Object.entries(item.tests)) out.set(testId, entry);
  }
  return out;
}
