import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import * as z from 'zod/mini';
import { ddb, getOrgItem, queryItems, table, updateIf } from '../../shared/aws/dynamo.js';
import { newId } from '../../shared/crypto.js';
import { ValidationError } from '../../shared/errors.js';
import {
  issueMessages,
  issuePath,
  listProblems,
  RESERVED_KEY,
  reservedMemberPaths,
  rowId,
} from '../../shared/validation.js';
import { type ScenarioRef, scenarioRefProblems } from '../scenarios/index.js';

/** A folder that groups tests (and so runs); its id comes from the imported file. */
export interface Folder {
  id: string;
  name: string;
}
export interface ApplicationVersion {
  name: string;
  path: string;
}
/** The page element a step acts on. */
export interface StepElement {
  html: string;
  selector: string;
}
/** A step of a test as stored. `instruction` may reference variables as `{{variable:<NAME>}}`. */
export interface TestStepItem {
  id: string;
  instruction: string;
  interaction: string;
  url: string;
  element: StepElement;
}

/** A copy of a step's own fields (no stored extras): what a Test shows and what a run starts from. */
export const copyStep = (s: TestStepItem): TestStepItem => ({
  id: s.id,
  instruction: s.instruction,
  interaction: s.interaction,
  url: s.url,
  element: { html: s.element.html, selector: s.element.selector },
});

/** A test as stored (table `tests`, key `testId`). `variables` are internal: never in a response. */
export interface TestItem {
  testId: string;
  orgId: string;
  name: string;
  createdAt: string;
  folder: Folder;
  /** The Application whose environments the test runs against (tests imported before runs had none). */
  applicationId?: string;
  /** Run each time an environment of the application becomes ready. */
  runOnPreview?: boolean;
  /** Per-step and per-run timeouts of this test, when the file sets them (else the service defaults). */
  stepTimeoutSeconds?: number;
  runTimeoutSeconds?: number;
  /** How many times a failed run is attempted again (0–3; absent: 0). */
  retries?: number;
  /** `false` when the file opts the test out of healing (a step whose selector matches nothing fails). */
  heal?: false;
  applicationVersion: ApplicationVersion;
  variables: Record<string, string>;
  /** Variables the file marks secret (`secret_variables`): masked in outputs whatever their names. */
  secretVariables?: string[];
  steps: TestStepItem[];
  /** The scenario provisioned through the Environment Factory before each run. */
  scenario?: ScenarioRef;
}

/** What callers see (Test); `steps` only when asked for. */
export interface TestView {
  id: string;
  name: string;
  created_at: string;
  folder: Folder;
  /** Present when the test belongs to an application. */
  application_id?: string;
  /** Present (true) when the test runs on every preview of its application. */
  run_on_preview?: true;
  application_version: ApplicationVersion;
  /** Present when the test names a scenario. */
  scenario?: { setup_id: string; recipe: string; version?: number };
  steps?: TestStepItem[];
}

const text = (max: number) => z.string().check(z.maxLength(max, `must be at most ${max} characters`));
const nonEmpty = (max: number) => text(max).check(z.minLength(1, 'must not be empty'));

const stepSchema = z.strictObject({
  instruction: nonEmpty(10_000),
  interaction: nonEmpty(256),
  url: z._default(text(4096), ''),
  // Optional where a step needs none (navigate, press on the page, assert-text of the page).
  element: z._default(z.strictObject({ html: text(100_000), selector: text(4096) }), {
    html: '',
    selector: '',
  }),
});

/**
 * One test of an import file (ids are generated on import, so the file carries none). Every object is
 * strict: a misspelt key (`run_on_preveiw`, `retires`) is refused by name, never dropped in silence.
 */
const testSchema = z.strictObject({
  name: nonEmpty(512),
  folder: z.strictObject({ id: rowId, name: nonEmpty(512) }),
  application_id: z.optional(rowId),
  run_on_preview: z._default(z.boolean(), false),
  step_timeout_seconds: z.optional(z.number().check(z.int(), z.gte(1), z.lte(600, 'must be at most 600'))),
  run_timeout_seconds: z.optional(z.number().check(z.int(), z.gte(5), z.lte(840, 'must be at most 840'))),
  retries: z.optional(
    z
      .number()
      .check(z.int('must be a whole number'), z.gte(0, 'must be at least 0'), z.lte(3, 'must be at most 3')),
  ),
  // Additive: `false` opts the test out of healing steps whose recorded selector matches nothing.
  heal: z.optional(z.boolean()),
  application_version: z.strictObject({ name: nonEmpty(512), path: text(4096) }),
  // Names are user-chosen keys: any name is data but `__proto__`, refused by parseTestsFile.
  variables: z._default(z.record(nonEmpty(256), text(10_000)), {}),
  // Names of `variables` whose values are masked in outputs whatever the name says.
  secret_variables: z.optional(z.array(nonEmpty(256)).check(z.maxLength(1000))),
  steps: z.array(stepSchema).check(z.maxLength(500, 'must have at most 500 steps')),
  scenario: z.optional(
    z.strictObject({
      setup_id: rowId,
      recipe: nonEmpty(512),
      version: z.optional(z.number().check(z.int(), z.gte(1))),
    }),
  ),
});

/** The file `previewctl tests import` reads: a JSON array of tests. */
export const testsFileSchema = z
  .array(testSchema)
  .check(z.minLength(1, 'must contain at least 1 test'), z.maxLength(1000));
export type TestsFile = z.infer<typeof testsFileSchema>;

/**
 * The problems of a tests file that need no lookup, each `[i].path: message`: its `__proto__` members
 * (a zod record would skip them silently; rule in shared/validation.ts) and every issue of the schema.
 */
function fileProblems(file: unknown): string[] {
  const problems = reservedMemberPaths(file).map((p) => `${issuePath(p)}: must not be ${RESERVED_KEY}`);
  const result = testsFileSchema.safeParse(file);
  if (!result.success)
    for (const issue of result.error.issues) {
      // One problem per unknown key, at its own path (`[2].run_on_preveiw: unknown key`).
      if (issue.code === 'unrecognized_keys')
        problems.push(...issue.keys.map((key) => `${issuePath([...issue.path, key])}: unknown key`));
      else problems.push(...issueMessages(new z.core.$ZodError([issue]), 1));
    }
  // A name marked secret must be one of the test's variables (a typo would leave the value shown).
  for (const [index, raw] of (Array.isArray(file) ? file : []).entries()) {
    const one = testSchema.safeParse(raw);
    if (!one.success) continue;
    for (const [j, name] of (one.data.secret_variables ?? []).entries())
      if (!Object.hasOwn(one.data.variables, name))
        problems.push(`[${index}].secret_variables[${j}]: ${name} is not one of the test's variables`);
  }
  return problems;
}

/**
 * The ValidationError of a tests file: every problem in one answer, those of a test together in file
 * order (`invalid tests file: [0].name: …; [0].steps[1].url: …; [3].scenario: …`).
 */
function invalidFile(problems: string[]): ValidationError {
  const indexOf = (p: string) => Number(/^\[(\d+)\]/.exec(p)?.[1] ?? -1);
  const ordered = problems.map((p, i) => ({ p, i, at: indexOf(p) }));
  ordered.sort((a, b) => a.at - b.at || a.i - b.i);
  return new ValidationError(
    `invalid tests file: ${listProblems(
      ordered.map((o) => o.p),
      2000,
    )}`,
  );
}

/** Parse a tests file, or throw a ValidationError naming every problem and where it is. */
export function parseTestsFile(file: unknown): TestsFile {
  const problems = fileProblems(file);
  if (problems.length > 0) throw invalidFile(problems);
  return testsFileSchema.parse(file);
}

/** The stored item for one test of a file: fresh test and step ids, created now. */
export function toTestItem(orgId: string, test: TestsFile[number], createdAt: string): TestItem {
  return {
    testId: newId(),
    orgId,
    name: test.name,
    createdAt,
    folder: { id: test.folder.id, name: test.folder.name },
    ...(test.application_id !== undefined ? { applicationId: test.application_id } : {}),
    ...(test.run_on_preview ? { runOnPreview: true } : {}),
    ...(test.step_timeout_seconds !== undefined ? { stepTimeoutSeconds: test.step_timeout_seconds } : {}),
    ...(test.run_timeout_seconds !== undefined ? { runTimeoutSeconds: test.run_timeout_seconds } : {}),
    ...(test.retries ? { retries: test.retries } : {}),
    ...(test.heal === false ? { heal: false as const } : {}),
    applicationVersion: { name: test.application_version.name, path: test.application_version.path },
    ...(test.scenario
      ? {
          scenario: {
            setupId: test.scenario.setup_id,
            recipe: test.scenario.recipe,
            ...(test.scenario.version !== undefined ? { version: test.scenario.version } : {}),
          },
        }
      : {}),
    variables: Object.assign(Object.create(null), test.variables) as Record<string, string>,
    ...(test.secret_variables?.length ? { secretVariables: [...new Set(test.secret_variables)] } : {}),
    steps: test.steps.map((s) => ({
      id: newId(),
      instruction: s.instruction,
      interaction: s.interaction,
      url: s.url,
      element: { html: s.element.html, selector: s.element.selector },
    })),
  };
}

/** Largest stored test (its JSON size); runs copy it, and DynamoDB items stop at 400 KB. */
export const MAX_TEST_BYTES = 300_000;

/** Whether the application exists in the organization (another org's is as absent as none). */
async function applicationOfOrg(orgId: string, applicationId: string): Promise<boolean> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('applications'), Key: { applicationId }, ConsistentRead: true }),
  );
  return Item !== undefined && Item.orgId === orgId;
}

/**
 * Import tests into an organization (`previewctl tests import [--app ID] <file>`).
 * Steps: validate the whole file first, sizes, applications and scenarios included, and report every
 * problem found in one ValidationError (nothing is written when any test is invalid; an `application_id`
 * must name an application of the organization, a scenario an uploaded recipe); the lookups are made for
 * the tests that pass the schema, so a typo in one test and a missing application in another are told
 * together; `--app` sets the application of every test; give each test and step a new id and the same
 * `created_at`; put each test (a new id never overwrites anything); then add each `run_on_preview` test
 * to its application's `previewTestIds` (what `startPreviewRuns` reads when an environment of it becomes
 * ready).
 * @param file the parsed JSON of the file
 * @returns the new ids and names, in file order
 */
export async function importTests(
  orgId: string,
  file: unknown,
  opts: { applicationId?: string } = {},
): Promise<{ tests: { id: string; name: string }[] }> {
  if (opts.applicationId !== undefined && !(await applicationOfOrg(orgId, opts.applicationId)))
    throw new ValidationError(`--app: no application ${opts.applicationId} in this organization`);
  const problems = fileProblems(file);
  // The tests that pass the schema, at their index in the file, for the checks that need a lookup.
  const valid = (Array.isArray(file) ? file : []).flatMap((raw, index) => {
    const one = testSchema.safeParse(raw);
    return one.success ? [{ index, test: one.data }] : [];
  });
  if (opts.applicationId !== undefined)
    for (const { test } of valid) test.application_id = opts.applicationId;
  else {
    const checked = new Map<string, boolean>();
    for (const { index, test } of valid) {
      if (test.application_id === undefined) continue;
      if (!checked.has(test.application_id))
        checked.set(test.application_id, await applicationOfOrg(orgId, test.application_id));
      if (!checked.get(test.application_id))
        problems.push(
          `[${index}].application_id: no application ${test.application_id} in this organization`,
        );
    }
  }
  problems.push(
    ...(await scenarioRefProblems(
      orgId,
      valid.flatMap(({ index, test: t }) =>
        t.scenario
          ? [
              {
                index,
                ref: { setupId: t.scenario.setup_id, recipe: t.scenario.recipe, version: t.scenario.version },
              },
            ]
          : [],
      ),
    )),
  );
  const createdAt = new Date().toISOString();
  for (const { index, test } of valid) {
    // A run copies its test's steps and variables, so leave room under DynamoDB's 400 KB item limit.
    if (Buffer.byteLength(JSON.stringify(toTestItem(orgId, test, createdAt))) > MAX_TEST_BYTES)
      problems.push(`[${index}]: test is larger than ${MAX_TEST_BYTES} bytes`);
  }
  if (problems.length > 0) throw invalidFile(problems);
  const items = valid.map(({ test }) => toTestItem(orgId, test, createdAt));
  for (const item of items) {
    await ddb().send(
      new PutCommand({
        TableName: table('tests'),
        // A Map, so a variable named `constructor` is stored as data (see shared/validation.ts).
        Item: { ...item, variables: new Map(Object.entries(item.variables)) },
        ConditionExpression: 'attribute_not_exists(testId)',
      }),
    );
  }
  const onPreview = new Map<string, string[]>();
  for (const item of items)
    if (item.runOnPreview && item.applicationId)
      onPreview.set(item.applicationId, [...(onPreview.get(item.applicationId) ?? []), item.testId]);
  for (const [applicationId, testIds] of onPreview) {
    // false: deleted since it was checked, and its tests simply never run on a preview.
    await updateIf({
      TableName: table('applications'),
      Key: { applicationId },
      UpdateExpression: 'ADD previewTestIds :ids',
      ConditionExpression: 'attribute_exists(applicationId) AND orgId = :org',
      ExpressionAttributeValues: { ':ids': new Set(testIds), ':org': orgId },
    });
  }
  return { tests: items.map((t) => ({ id: t.testId, name: t.name })) };
}

/** The test if it exists in the org; 404 otherwise (another org's test is "not found", never 403). */
export async function findTest(orgId: string, testId: string): Promise<TestItem> {
  return getOrgItem<TestItem>('tests', { testId }, orgId, 'test');
}

export function toTestView(test: TestItem, opts: { steps: boolean }): TestView {
  return {
    id: test.testId,
    name: test.name,
    created_at: test.createdAt,
    folder: { id: test.folder.id, name: test.folder.name },
    ...(test.applicationId !== undefined ? { application_id: test.applicationId } : {}),
    ...(test.runOnPreview ? { run_on_preview: true as const } : {}),
    application_version: { name: test.applicationVersion.name, path: test.applicationVersion.path },
    ...(test.scenario
      ? {
          scenario: {
            setup_id: test.scenario.setupId,
            recipe: test.scenario.recipe,
            ...(test.scenario.version !== undefined ? { version: test.scenario.version } : {}),
          },
        }
      : {}),
    ...(opts.steps
      ? {
          steps: test.steps.map(copyStep),
        }
      : {}),
  };
}

/** GET /test/{test_id}: one test of the caller's org; steps only when asked for; never its variables. */
export async function getTest(orgId: string, testId: string, opts: { steps: boolean }): Promise<TestView> {
  return toTestView(await findTest(orgId, testId), opts);
}

/**
 * GET /test: the org's tests, newest first (the `byOrg` index read backwards), optionally of one folder;
 * no steps.
 */
export async function listTests(orgId: string, filters: { folderId?: string } = {}): Promise<TestView[]> {
  const byFolder = filters.folderId !== undefined;
  const out: TestView[] = [];
  for await (const test of queryItems<TestItem>({
    TableName: table('tests'),
    IndexName: 'byOrg',
    KeyConditionExpression: 'orgId = :o',
    ScanIndexForward: false,
    ...(byFolder
      ? {
          FilterExpression: '#folder.#id = :f',
          ExpressionAttributeNames: { '#folder': 'folder', '#id': 'id' },
          ExpressionAttributeValues: { ':o': orgId, ':f': filters.folderId },
        }
      : { ExpressionAttributeValues: { ':o': orgId } }),
  }))
    out.push(toTestView(test, { steps: false }));
  return out;
}
