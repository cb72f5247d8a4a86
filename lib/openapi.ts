/**
 * The OpenAPI 3.1 document of the service, generated from the route manifest and the zod schemas each
 * route validates with (the same ones the handlers run), so it cannot drift from the code. Served by the
 * local server at `GET /openapi.json` and written to docs/openapi.json by `npm run openapi`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as z from 'zod/mini';
import { routeSchemas } from '../functions/api/route.js';
import { type AuthKind, type RouteId, routes } from '../functions/manifest/routes.js';

const ROOT = join(new URL('..', import.meta.url).pathname);

const REPORT_URL_NOTE =
  "Each TestRun carries `report_url` (additive): a signed link to the run's report page, minted when read and valid 7 days (no credentials needed to open it), as the start-run answer's `url`. " +
  'A run read whole (GET /run/{run_id}, or GET /run with steps=true) adds `environment` (additive) once its target was resolved: `{repository, pr_number, commit}` of the environment it ran against.' +
  " With `media=true` it also carries `trace_url` (additive): a signed link, like `video_url`, to the run's Playwright trace (a zip the trace viewer at `/trace-viewer/` opens); null before it is stored and on a list page read without `steps=true`." +
  ' A run read whole may carry `metadata.attempts` (additive: how many attempts a test with `retries` took) and `metadata.flaky: true` (a later attempt passed after a failed one; the run is `passed`).' +
  ' A run against an environment may carry `metadata.wake` (additive: `{waited_ms, apps}`, how long it waited before its first step for its preview to wake and when each app answered), and a run whose preview never answered `metadata.error_kind: "environment"` (additive; its `error` names the environment, not a step).' +
  " A run read whole with a healed step carries `healed_steps` (additive: how many), and with `steps=true` each healed step `healed` (additive: `{from, to, score, html}`, the recorded selector that matched nothing, the one it acted on, the heal's score 0..1 and the element's outer HTML, masked)." +
  " With `steps=true` a step may carry `metadata` (additive): `console` ([{level, text}]: console errors and warnings, page errors), `network` ([{status, text}]: failed or 4xx/5xx requests, and `refused` ones: the page's requests outside what the run may reach, refused without failing the step), `events_dropped`; masked, at most 20 per step." +
  " A run read whole whose page asked for origins the run may not reach carries `refused_requests` (additive: `{origins, hint}`, the refused origins and how an application's allowedOrigins admits one); only the page's own navigation refused fails a step.";

const UNDECLARED_APP_NOTE =
  'The answer carries `warning` (additive) when environments of the application have read their preview.yaml and none declares the app: the secret is saved, and the warning names the apps they declare.';

/** Per route: what success answers, which errors it can answer, and what the spec leaves open. */
const DOCS: Record<
  string,
  { summary: string; success: [number, string]; errors: number[]; notes?: string; contentType?: string }
> = {
  createEnvironment: {
    summary: 'Create or redeploy a pull request environment',
    success: [202, 'Accepted: the pipeline runs in the background; poll statusUrl'],
    errors: [400, 401, 404, 409, 413],
    notes:
      "The repository must be linked to an application of the caller's organization (404 naming it otherwise; nothing is stored). The stored repoFullName is the one the application links.",
  },
  deployMainBranch: {
    summary: "Deploy the application's linked repository main branch as environment 0",
    success: [202, 'Accepted'],
    errors: [401, 404, 409, 503],
    notes: '409 when the application is disabled, unlinked, or no installation of the source host covers it.',
  },
  getEnvironment: {
    summary: 'Poll an environment status',
    success: [200, 'PreviewStatus'],
    errors: [400, 401, 404],
    notes:
      "Additive: a protected environment (its application's `access`) carries `accessUrls` (app → signed link " +
      'that sets its access cookie, valid 7 days); a sleeping one says `phase: asleep` and `asleepAt`. ' +
      'Additive: `apps`, the app names the preview config declares once it was read (present also while no app has a URL, e.g. after a failed start). ' +
      'A `failed` environment keeps nothing running: its apps are stopped, `urls` is empty and `stoppedApps` (additive, an object: app name → why it is not running, e.g. `{"api": "exited (exit code 1): Error: …", "web": "stopped: the environment failed"}`) names them; absent when nothing was running. See docs/reference/api.md#statuses. ' +
      'Once a deploy has applied its apps, `builds` says per app how it got what it runs: app → ' +
      '`{"result": "built" | "reused", "commit": <the commit it was built from>}` (reused: an earlier build ' +
      'with the same inputs, from any commit or pull request; docs/builds.md). ' +
      'Additive: `services`, the databases preview.yaml `services:` declares once a deploy has provided them: ' +
      'name → `{"kind": "postgres" | "redis", "status": "creating" | "ready" | "asleep" | "stopped" | "failed"}` ' +
      '(creating: on EKS, until the cluster has it ready and seeded; stopped: the environment failed; failed: ' +
      'the service itself did, its database or its seed; gone at teardown). Their credentials never appear in any answer ' +
      '(docs/reference/preview-yaml.md#services-a-database-per-preview). ' +
      "Additive: `gate`, the merge gate of the pull request's latest head: `{status: queued | in_progress | completed, conclusion?, title, headSha}` as its `Preview tests` check run shows them; absent when the application has no run_on_preview tests (docs/reference/merge-gate.md).",
  },
  teardownEnvironment: {
    summary: 'Tear an environment down',
    success: [202, 'Accepted (also for an environment that does not exist: nothing happens)'],
    errors: [400, 401],
  },
  getAppLogs: {
    summary: "Read the end of an app's output, or of its latest build's (text)",
    success: [200, 'The last `tail` lines (default 200, at most 10000), secret values masked'],
    errors: [400, 401, 404],
    contentType: 'text/plain',
    notes:
      "source=app (default): the output of the app's latest process (locally) or of its pods, a `--- pod … ---` header each (EKS); source=build: its latest build's log (locally the build's output, in AWS the CodeBuild log in CloudWatch Logs). At most 1 MB: longer output is cut from the start under a first line saying so. 404 for an unknown app, another organization's environment, or a log that does not exist yet. Errors are JSON. See docs/logs.md.",
  },
  redeployEnvironment: {
    summary: 'Re-run the pipeline at the stored head SHA',
    success: [202, 'Accepted'],
    errors: [400, 401, 404, 409],
  },
  redeployApp: {
    summary: 'Redeploy one app (rebuild or restart); siblings are untouched',
    success: [202, 'Accepted'],
    errors: [400, 401, 404, 409, 413],
    notes: '409 while another deploy of the environment is in progress.',
  },
  listSecrets: {
    summary: 'List secret keys (never values)',
    success: [200, 'Key names and metadata'],
    errors: [400, 401, 404],
  },
  putSecrets: {
    summary: 'Batch upsert secrets',
    success: [200, 'Saved'],
    errors: [400, 401, 404, 409, 413],
    notes: UNDECLARED_APP_NOTE,
  },
  putSecret: {
    summary: 'Upsert one secret',
    success: [200, 'Saved'],
    errors: [400, 401, 404, 409, 413],
    notes: UNDECLARED_APP_NOTE,
  },
  deleteSecret: {
    summary: 'Delete one secret key',
    success: [200, 'Deleted'],
    errors: [400, 401, 404, 409],
  },
  createRecipeVersion: {
    summary: 'Upload a scenario recipes file (a new version of the setup)',
    success: [201, 'Created: the setup id and its new version'],
    errors: [400, 401, 404, 413],
    notes: 'Authenticated with the API key (the spec leaves it open).',
  },
  listRecipeVersions: {
    summary: "List a setup's recipe versions, newest first (additive)",
    success: [200, '{versions: [{setupId, version, recipeCount, createdAt}]}'],
    errors: [400, 401, 404],
    notes: "404 for a setup that does not exist or is another organization's.",
  },
  getRecipeVersion: {
    summary: 'Read one recipe version with its file as uploaded (additive)',
    success: [200, '{setupId, version, recipeCount, createdAt, file}'],
    errors: [400, 401, 404],
  },
  startRun: {
    summary: 'Start a run of a test',
    success: [201, 'Created: run_id and url'],
    errors: [400, 401, 404, 413],
  },
  listRuns: {
    summary: 'List test runs, newest first',
    success: [200, 'TestRun array'],
    errors: [400, 401],
    notes: `${REPORT_URL_NOTE} With \`flaky=true\` (additive) only the flaky runs are listed, each with \`metadata.flaky: true\`. With \`healed=true\` (additive) only the runs with a healed step, each with \`healed_steps\`.`,
  },
  getRun: {
    summary: 'Read one run',
    success: [200, 'TestRun'],
    errors: [400, 401, 404],
    notes: REPORT_URL_NOTE,
  },
  listTests: {
    summary: "List the organization's tests, newest first (additive)",
    success: [200, 'Test array (without steps)'],
    errors: [400, 401],
    notes: '`folder` keeps the tests of one folder (the folder id of the tests file).',
  },
  getTest: { summary: 'Read one test', success: [200, 'Test'], errors: [400, 401, 404] },
  skipGate: {
    summary: "Skip the merge gate of a pull request's head with a reason (additive)",
    success: [200, '{repoFullName, prNumber, sha, conclusion: neutral, title}'],
    errors: [400, 401, 404, 409, 413],
    notes:
      "Completes the head's `Preview tests` check run `neutral`, naming `by` and `reason` (both required), as a " +
      '`/preview skip-tests <reason>` comment does. 409 when the head has no check run: docs/reference/merge-gate.md.',
  },
  getGate: {
    summary: 'Read the merge gate of one head commit of a pull request (additive)',
    success: [
      200,
      '{repoFullName, prNumber, sha, story, status, conclusion?, title, end?, completedAt?, runs: [{runId, testId, name, status, durationMs?, retries, flaky, previewNeverAnswered?, quarantine?, failedStep?, error?, reportUrl?}]}',
    ],
    errors: [400, 401, 404],
    notes:
      "The `Preview tests` check run of the head `commit` (a full SHA; absent: the latest head the gate saw): its status, conclusion and title, what ended its story (`end`: `{kind: skipped, by, reason}`, `superseded`, `closed`, `preview-failed`), and each run with its signed report link (valid 7 days); a quarantined test's run carries `quarantine: {owner, reason, until}` (its failure does not fail the gate). 404 for another organization's environment or a head with no check run. What the dashboard's per-commit view (`/?env=…&commit=…`) shows: docs/reference/merge-gate.md.",
  },
  quarantineTest: {
    summary: 'Quarantine a run_on_preview test: its failure does not fail the merge gate (additive)',
    success: [200, '{test_id, test_name, application_id, owner, reason, until, since}'],
    errors: [400, 401, 404, 409, 413],
    notes:
      '`owner` and `reason` are required; `until` (a date, YYYY-MM-DD, or an ISO 8601 time) is at most 30 days ahead, ' +
      'default 30 days. The test still runs and the check run lists it; after `until` its failures count again. ' +
      "409 past the application's cap (a fifth of its run_on_preview tests, at least one) or for a test that does " +
      'not run on previews. Quarantining a quarantined test replaces its owner, reason and end: docs/reference/merge-gate.md.',
  },
  unquarantineTest: {
    summary: "End a test's quarantine now (additive)",
    success: [200, '{test_id, test_name, application_id, owner, reason, until, since, ended: true}'],
    errors: [400, 401, 404],
    notes: '404 when the test is not quarantined (or its quarantine already ended).',
  },
  listQuarantined: {
    summary: "List the organization's quarantined tests (additive)",
    success: [200, '{quarantined: [{test_id, test_name, application_id, owner, reason, until, since}]}'],
    errors: [400, 401],
    notes: '`application_id` keeps one application. Quarantines that ended are not listed.',
  },
  listApplications: {
    summary: "List the organization's applications, oldest first (additive)",
    success: [
      200,
      '{applications: [{applicationId, name, repoFullName (null when unlinked), disabled, installationActive, ttlHours, deployDrafts, allowedOrigins (the origins test runs may load besides the preview), createdAt, access (protected|public), sleepAfterMinutes}]}',
    ],
    errors: [400, 401],
    notes: '`repo=owner/repo` keeps the application linking that repository (none or one).',
  },
  updateApplication: {
    summary: 'Change which pull requests get a preview, and their front door (additive)',
    success: [
      200,
      'The application as the listing shows it, with skipLabel, requireLabel, paths, skipAuthors, access, sleepAfterMinutes',
    ],
    errors: [400, 401, 404, 413],
    notes:
      'skipLabel (default `no-preview`, "" for none), requireLabel ("" for none), paths (globs a pull request ' +
      'must touch, [] for none), skipAuthors (GitHub logins, [] for none): docs/reference/webhooks-and-events.md. ' +
      'access (`protected`|`public`) and sleepAfterMinutes (0 = never, decimals allowed), followed by each ' +
      'environment on its next deploy: docs/reference/access-and-sleep.md.',
  },
};

const ERRORS: Record<number, string> = {
  400: 'Invalid input (the error names the field, e.g. `items[0].key`)',
  401: 'Missing or invalid credentials: the message says which credential the route takes',
  404: "Not found, or not the caller's organization's",
  409: 'The object is in a state that forbids the operation',
  413: 'Request body too large for this route',
  503: 'A capability this deployment cannot provide right now (the message says which)',
};

const SECURITY: Record<AuthKind, Record<string, string[]>[]> = {
  apiKey: [{ apiKey: [] }],
  client: [{ clientId: [], clientSecret: [] }],
  githubWebhook: [{ githubSignature: [] }],
};

// biome-ignore lint/suspicious/noExplicitAny: JSON Schema documents are open-ended.
type JsonSchema = Record<string, any>;
const jsonSchema = (schema: z.core.$ZodType) =>
  z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }) as JsonSchema;

function parameters(schema: z.core.$ZodType | undefined, where: 'path' | 'query') {
  if (!schema) return [];
  const s = jsonSchema(schema);
  const required = new Set<string>(s.required ?? []);
  return Object.entries((s.properties ?? {}) as Record<string, Record<string, unknown>>).map(
    ([name, prop]) => {
      const { $schema: _s, ...rest } = prop;
      return { name, in: where, required: where === 'path' || required.has(name), schema: rest };
    },
  );
}

/** Load every route's handler (so its schemas register) and describe them all. */
export async function buildOpenApi(): Promise<Record<string, unknown>> {
  for (const def of Object.values(routes)) await import(pathToFileURL(join(ROOT, def.entry)).href);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    version: string;
    description: string;
  };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [id, def] of Object.entries(routes) as [RouteId, (typeof routes)[RouteId]][]) {
    const schemas = routeSchemas.get(id);
    const doc = DOCS[id] ?? { summary: id, success: [200, 'OK'] as [number, string], errors: [400, 401] };
    const responses: Record<string, unknown> = {
      [String(doc.success[0])]: {
        description: doc.success[1],
        content: doc.contentType
          ? { [doc.contentType]: { schema: { type: 'string' } } }
          : { 'application/json': { schema: {} } },
      },
    };
    for (const code of doc.errors) responses[String(code)] = { $ref: `#/components/responses/E${code}` };
    const body = schemas?.body
      ? {
          required: schemas.bodyRequired ?? false,
          content: {
            'application/json': { schema: (({ $schema: _s, ...rest }) => rest)(jsonSchema(schemas.body)) },
          },
        }
      : undefined;
    paths[def.path] ??= {};
    paths[def.path]![def.method.toLowerCase()] = {
      operationId: id,
      summary: doc.summary,
      ...(doc.notes ? { description: doc.notes } : {}),
      security: SECURITY[def.auth],
      parameters: [...parameters(schemas?.params, 'path'), ...parameters(schemas?.query, 'query')],
      ...(body ? { requestBody: body } : {}),
      responses,
      'x-max-body-bytes': (def as { maxBodyBytes?: number }).maxBodyBytes ?? 65_536,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Preview control plane',
      version: pkg.version,
      description:
        `${pkg.description} The preview, secrets and recipe routes carry /v1; the test and run routes do not. ` +
        'Every error answer is `{"error": "..."}`. Generated from the route manifest and the handlers\' zod schemas.',
    },
    paths,
    components: {
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'Authorization: Bearer pvk_<keyId>_<secret> (preview, secrets, recipes)',
        },
        clientId: { type: 'apiKey', in: 'header', name: 'svc-client-id', description: 'Test and run routes' },
        clientSecret: {
          type: 'apiKey',
          in: 'header',
          name: 'svc-client-secret',
          description: 'Test and run routes',
        },
        githubSignature: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Hub-Signature-256',
          description: 'GitHub webhooks: HMAC-SHA256 of the raw body with the App webhook secret',
        },
      },
      schemas: {
        ErrorResponse: {
          type: 'object',
          required: ['error'],
          properties: { error: { type: 'string' } },
          additionalProperties: false,
        },
      },
      responses: Object.fromEntries(
        Object.entries(ERRORS).map(([code, description]) => [
          `E${code}`,
          {
            description,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
          },
        ]),
      ),
    },
  };
}
