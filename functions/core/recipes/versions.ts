import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import * as z from 'zod/mini';
import { ddb, isConditionFailure, queryItems, table } from '../../shared/aws/dynamo.js';
import { sha256Hex } from '../../shared/crypto.js';
import { NotFoundError, PayloadTooLargeError, ValidationError } from '../../shared/errors.js';
import { jsonInteger } from '../../shared/json-literal.js';
import { issuePath } from '../../shared/validation.js';

/*
 * Scenario recipes (endpoint 11): a planner uploads a ScenarioRecipesFile for a setup; every accepted
 * upload becomes the next version of that setup. Table `recipes` (pk setupId, sk version): version 0 is
 * the setup's header `{ setupId, version: 0, orgId, latestVersion }`, versions 1.. hold the files.
 */

/** Largest accepted body in bytes (UTF-8): a DynamoDB item holds at most 400 KB, attributes included. */
export const MAX_RECIPES_FILE_BYTES = 350 * 1024;

/** The built-in tokens a value in `create` may contain; any other `{{...}}` resolves to nothing. */
export const BUILT_IN_TOKENS: ReadonlySet<string> = new Set(['{{testRunId}}', '{{testRunShortId}}']);

/** A token: `{{`, characters other than braces, `}}`. Spelling is exact: `{{ testRunId }}` is unknown. */
const TOKEN_RE = /\{\{[^{}]*\}\}/g;

/**
 * Value of the `{{testRunShortId}}` token: the first 8 hex characters of the SHA-256 (of the UTF-8
 * bytes) of the testRunId, short enough for usernames, slugs and subdomains.
 * `{{testRunId}}` is the testRunId itself, as sent to the Environment Factory in the up request.
 */
export function testRunShortId(testRunId: string): string {
  return sha256Hex(testRunId).slice(0, 8);
}

// ---------------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------------

/** zod `error` option: `required` when the value is absent, `what` otherwise. */
const says = (what: string) => ({
  error: (issue: { input?: unknown }) => (issue.input === undefined ? 'required' : what),
});
const requiredString = z.string(says('must be a string'));
const nonNegativeInt = z.number(says('must be an integer >= 0')).check(z.int(), z.gte(0));

/** The file's shape. `create` is only required to be an object here: `checkCreate` walks it. */
const fileSchema = z.looseObject({
  version: z.literal(1, says('must be the integer 1')),
  source: z.looseObject(
    { discoverPath: requiredString, scenariosPath: requiredString },
    says('must be an object'),
  ),
  validationMode: z.enum(
    ['sdk-check', 'endpoint-lifecycle'],
    says('must be sdk-check or endpoint-lifecycle'),
  ),
  recipes: z
    .array(
      z.looseObject(
        {
          name: requiredString,
          description: requiredString,
          create: z.record(z.string(), z.unknown(), says('must be an object: model name -> array of rows')),
          // Deprecated: accepted and kept for recipes that already declare it, never required.
          variables: z.optional(z.record(z.string(), z.unknown(), says('must be an object'))),
          validation: z.looseObject(
            {
              status: z.literal('validated', says('must be "validated"')),
              method: z.enum(
                ['checkScenario', 'checkAllScenarios', 'endpoint-up-down'],
                says('must be checkScenario, checkAllScenarios or endpoint-up-down'),
              ),
              phase: z.literal('ok', says('must be "ok"')),
              up_ms: z.optional(nonNegativeInt),
              down_ms: z.optional(nonNegativeInt),
            },
            says('must be an object'),
          ),
        },
        says('must be an object'),
      ),
      says('must be an array of recipes'),
    )
    .check(z.minLength(1, 'must have at least 1 recipe')),
});

const MAX_REPORTED = 5;

function reject(problems: string[]): never {
  const more = problems.length > MAX_REPORTED ? ` (and ${problems.length - MAX_REPORTED} more)` : '';
  throw new ValidationError(`${problems.slice(0, MAX_REPORTED).join('; ')}${more}`);
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isName = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

function unknownTokens(text: string): string[] {
  return [...text.matchAll(TOKEN_RE)].map((m) => m[0]).filter((t) => !BUILT_IN_TOKENS.has(t));
}

/**
 * Check one recipe's `create` graph, appending problems:
 * 1. every model's value is an array of row objects;
 * 2. a row's `_alias` is a non-empty string, unique within the recipe;
 * 3. every string value and every key, at any depth, holds no `{{token}}` but the built-ins;
 * 4. every `{ "_ref": alias }`, at any depth, names a non-empty alias declared by a row of this recipe.
 */
function checkCreate(create: Record<string, unknown>, at: readonly PropertyKey[], problems: string[]): void {
  const aliases = new Map<string, string>(); // alias -> path of the declaring row
  const refs: { alias: string; path: string }[] = [];

  const tokensIn = (text: string, path: readonly PropertyKey[], what: string) => {
    for (const token of unknownTokens(text))
      problems.push(`unknown token ${token} in ${what}${issuePath(path)}: tokens that resolve to nothing`);
  };
  const walk = (value: unknown, path: readonly PropertyKey[]): void => {
    if (typeof value === 'string') tokensIn(value, path, '');
    else if (Array.isArray(value)) for (const [i, v] of value.entries()) walk(v, [...path, i]);
    if (!isRecord(value)) return;
    if (Object.hasOwn(value, '_ref')) {
      const alias = value._ref;
      if (isName(alias)) refs.push({ alias, path: issuePath(path) });
      else problems.push(`${issuePath([...path, '_ref'])}: must be a non-empty string (an _alias)`);
    }
    for (const [k, v] of Object.entries(value)) {
      tokensIn(k, [...path, k], 'the key ');
      walk(v, [...path, k]);
    }
  };

  for (const [model, rows] of Object.entries(create)) {
    const modelPath = [...at, model];
    tokensIn(model, modelPath, 'the key ');
    if (!Array.isArray(rows)) {
      problems.push(`${issuePath(modelPath)}: must be an array of row objects`);
      continue;
    }
    for (const [i, row] of rows.entries()) {
      const rowPath = [...modelPath, i];
      if (!isRecord(row)) {
        problems.push(`${issuePath(rowPath)}: must be a row object`);
        continue;
      }
      if (Object.hasOwn(row, '_alias')) {
        const alias = row._alias;
        const declared = isName(alias) ? aliases.get(alias) : undefined;
        if (!isName(alias)) problems.push(`${issuePath([...rowPath, '_alias'])}: must be a non-empty string`);
        else if (declared)
          problems.push(
            `duplicate _alias "${alias}" in ${issuePath(rowPath)}: already declared by ${declared}`,
          );
        else aliases.set(alias, issuePath(rowPath));
      }
      walk(row, rowPath);
    }
  }
  for (const ref of refs)
    if (!aliases.has(ref.alias)) problems.push(`_ref "${ref.alias}" in ${ref.path} matches no _alias`);
}

/** What validation learns about an accepted file. */
export interface RecipesFileSummary {
  recipeCount: number;
}

/**
 * Validate a ScenarioRecipesFile (pure). Throws a ValidationError whose message names every problem
 * found (up to 5): the field path (`source.discoverPath: required`), the unknown token
 * (`unknown token {{userId}} in recipes[0].create.users[1].name: tokens that resolve to nothing`) or the
 * dangling alias (`_ref "acct" in recipes[0].create.orders[0].account matches no _alias`).
 * Unknown keys anywhere are accepted (the file is stored as uploaded).
 * @param doc the parsed body
 * @param rawBody the body as sent; when given, `version` must also be written as the integer `1`
 *   (`1.0` and `1e0` parse to 1 but are rejected)
 */
export function validateRecipesFile(doc: unknown, rawBody?: string): RecipesFileSummary {
  if (!isRecord(doc)) throw new ValidationError('recipes file must be a JSON object');
  if (rawBody !== undefined) jsonInteger(rawBody, 'version');
  const parsed = fileSchema.safeParse(doc);
  if (!parsed.success) reject(parsed.error.issues.map((i) => `${issuePath(i.path)}: ${i.message}`));
  const problems: string[] = [];
  parsed.data.recipes.forEach((recipe, i) => {
    checkCreate(recipe.create, ['recipes', i, 'create'], problems);
  });
  if (problems.length > 0) reject(problems);
  return { recipeCount: parsed.data.recipes.length };
}

// ---------------------------------------------------------------------------------------------------
// Storage
// ---------------------------------------------------------------------------------------------------

/** What an accepted upload answers (201). */
export interface RecipeVersion {
  setupId: string;
  version: number;
  recipeCount: number;
  createdAt: string;
}

/**
 * Store a new version of a setup's scenario recipes.
 * Steps:
 * 1. 413 when the body is over {@link MAX_RECIPES_FILE_BYTES}; 400 when the file breaks a rule
 *    (`validateRecipesFile`). Nothing is stored, and nothing about the setup is revealed.
 * 2. Claim and bump the header (version 0) in one conditional update: the first upload to a setupId
 *    makes it the caller's org's setup; for any other org the condition fails → 404 `setup not found`.
 *    The atomic `ADD` gives concurrent uploads distinct version numbers.
 * 3. Put the version item `{ setupId, version, orgId, recipeCount, createdAt, fileJson }`, where
 *    `fileJson` is the body exactly as uploaded (extra keys included), on the condition it is new.
 * A crash between 2 and 3 leaves a gap in the version numbers, never two files under one version.
 */
export async function createRecipeVersion(input: {
  orgId: string;
  setupId: string;
  /** The parsed body. */
  doc: unknown;
  /** The body as sent. */
  rawBody: string | undefined;
}): Promise<RecipeVersion> {
  const raw = input.rawBody ?? '';
  if (Buffer.byteLength(raw, 'utf8') > MAX_RECIPES_FILE_BYTES)
    throw new PayloadTooLargeError(
      `recipes file is too large: at most ${MAX_RECIPES_FILE_BYTES} bytes (350 KB)`,
    );
  const { recipeCount } = validateRecipesFile(input.doc, raw);

  let version: number;
  try {
    const { Attributes } = await ddb().send(
      new UpdateCommand({
        TableName: table('recipes'),
        Key: { setupId: input.setupId, version: 0 },
        UpdateExpression: 'SET orgId = if_not_exists(orgId, :org) ADD latestVersion :one',
        ConditionExpression: 'attribute_not_exists(setupId) OR orgId = :org',
        ExpressionAttributeValues: { ':org': input.orgId, ':one': 1 },
        ReturnValues: 'UPDATED_NEW',
      }),
    );
    version = (Attributes as { latestVersion: number }).latestVersion;
  } catch (err) {
    if (isConditionFailure(err)) throw new NotFoundError('setup not found');
    throw err;
  }

  const createdAt = new Date().toISOString();
  await ddb().send(
    new PutCommand({
      TableName: table('recipes'),
      Item: {
        setupId: input.setupId,
        version,
        orgId: input.orgId,
        recipeCount,
        createdAt,
        fileJson: raw,
      },
      ConditionExpression: 'attribute_not_exists(setupId)',
    }),
  );
  return { setupId: input.setupId, version, recipeCount, createdAt };
}

/** The setup's header when it is the org's; 404 `setup not found` otherwise (another org's setup too). */
async function ownSetup(orgId: string, setupId: string): Promise<void> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('recipes'), Key: { setupId, version: 0 }, ConsistentRead: true }),
  );
  if (!Item || Item.orgId !== orgId) throw new NotFoundError('setup not found');
}

/**
 * GET …/scenario-recipe-versions: the setup's versions, newest first, without their files. One Query of
 * the setup's partition (versions 1..) projecting the summary only.
 */
export async function listRecipeVersions(orgId: string, setupId: string): Promise<RecipeVersion[]> {
  await ownSetup(orgId, setupId);
  const out: RecipeVersion[] = [];
  for await (const item of queryItems<RecipeVersion>({
    TableName: table('recipes'),
    KeyConditionExpression: 'setupId = :s AND #v > :zero',
    ExpressionAttributeNames: { '#v': 'version' },
    ExpressionAttributeValues: { ':s': setupId, ':zero': 0 },
    ProjectionExpression: 'setupId, #v, recipeCount, createdAt',
    ScanIndexForward: false,
  }))
    out.push({
      setupId: item.setupId,
      version: item.version,
      recipeCount: item.recipeCount,
      createdAt: item.createdAt,
    });
  return out;
}

/** GET …/scenario-recipe-versions/{version}: one version with its file as uploaded (`file`). */
export async function getRecipeVersion(
  orgId: string,
  setupId: string,
  version: number,
): Promise<RecipeVersion & { file: unknown }> {
  await ownSetup(orgId, setupId);
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('recipes'), Key: { setupId, version }, ConsistentRead: true }),
  );
  if (!Item || version < 1) throw new NotFoundError('recipe version not found');
  const item = Item as RecipeVersion & { fileJson: string };
  return {
    setupId,
    version,
    recipeCount: item.recipeCount,
    createdAt: item.createdAt,
    file: JSON.parse(item.fileJson),
  };
}
