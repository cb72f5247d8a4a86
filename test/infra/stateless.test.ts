import { describe, expect, test } from '@jest/globals';
import { eventRules, schedules } from '../../functions/manifest/events.js';
import { pages, type RouteDef, type RouteId, routeIds, routes } from '../../functions/manifest/routes.js';
import { type TableName, tableNames, tables } from '../../functions/manifest/tables.js';
import { workers } from '../../functions/manifest/workers.js';
import { parseConfig } from '../../functions/shared/config.js';
import { stateMachineArnEnv } from '../../lib/cdk/access.js';
import {
  actionsOf,
  expectSecrets,
  functions,
  linkSecretId,
  logicalId,
  resources,
  stateless,
  stepEntries,
  tableAccess,
  tableLogicalId,
  taskResponseActions,
  template,
  workflowNames,
  writeActions,
} from './stateless-stack.js';
import {
  asArray,
  clusterContext,
  cyclesOf,
  declaredFunctions,
  grantsOf,
  type Json,
  mentions,
  resourcesOf,
  statementsOf,
  synthesize,
} from './synth.js';

// The stateless stack's functions, routes and REST API; its workflows are in stateless-workflows.test.ts,
// the synthesis they share in stateless-stack.ts.
const routeFunctionId = (id: RouteId) => logicalId(stateless.routeFunctions[id]);
/** The functions whose manifest entry declares `browser`. */
const declaredBrowser = new Set(
  declaredFunctions(stateless)
    .filter(([, fn]) => fn.access.browser)
    .map(([, fn]) => fn.id),
);
const tagValue = (fn: Json, key: string): string | undefined =>
  asArray<{ Key: string; Value: string }>(fn.Properties.Tags).find((t) => t.Key === key)?.Value;

/** Full path of an API Gateway resource, from its logical id (or the root). */
function resourcePath(ref: Json): string {
  if (ref['Fn::GetAtt']?.[1] === 'RootResourceId') return '';
  const resource = resources[ref.Ref];
  return `${resourcePath(resource.Properties.ParentId)}/${resource.Properties.PathPart}`;
}

describe('functions', () => {
  test('one function per route, per page, per unique step entry, per event rule, per schedule and per worker, nothing else', () => {
    const byRoute = Object.values(functions).map((fn) => tagValue(fn, 'preview:route'));
    const byPage = Object.values(functions).map((fn) => tagValue(fn, 'preview:page'));
    expect(byPage.filter(Boolean).sort()).toEqual(Object.keys(pages).sort());
    const bySteps = Object.values(functions).map((fn) => tagValue(fn, 'preview:step'));
    const byEvent = Object.values(functions).map((fn) => tagValue(fn, 'preview:event'));
    const bySchedule = Object.values(functions).map((fn) => tagValue(fn, 'preview:schedule'));
    const byWorker = Object.values(functions).map((fn) => tagValue(fn, 'preview:worker'));
    expect(byRoute.filter(Boolean).sort()).toEqual([...routeIds].sort());
    expect(bySteps.filter(Boolean).sort()).toEqual([...stepEntries].sort());
    expect(byEvent.filter(Boolean).sort()).toEqual(Object.keys(eventRules).sort());
    expect(bySchedule.filter(Boolean).sort()).toEqual(Object.keys(schedules).sort());
    expect(byWorker.filter(Boolean).sort()).toEqual(Object.keys(workers).sort());
    expect(Object.keys(functions)).toHaveLength(
      routeIds.length +
        Object.keys(pages).length +
        stepEntries.length +
        Object.keys(eventRules).length +
        Object.keys(schedules).length +
        Object.keys(workers).length,
    );
  });

  test.each(Object.keys(functions))(
    '%s runs Node.js >= 22 on arm64 (the browser on x86_64) with tracing and a retained log',
    (id) => {
      const props = functions[id].Properties;
      expect(props.Runtime).toMatch(/^nodejs\d+\.x$/);
      expect(Number(/^nodejs(\d+)/.exec(props.Runtime)?.[1])).toBeGreaterThanOrEqual(22);
      // Only a function that drives the headless browser runs on x86_64 (test-runs.test.ts checks it).
      const browser = declaredBrowser.has(id);
      expect(props.Architectures).toEqual([browser ? 'x86_64' : 'arm64']);
      expect(props.TracingConfig).toEqual({ Mode: 'Active' });
      if (browser) expect(props.MemorySize).toBeGreaterThanOrEqual(2048);
      else expect(props.MemorySize).toBe(512);
      expect(props.Handler).toBe('index.handler');
      expect(props.FunctionName).toBeUndefined();
      const logGroup = resources[props.LoggingConfig.LogGroup.Ref];
      expect(logGroup.Type).toBe('AWS::Logs::LogGroup');
      expect(logGroup.Properties.RetentionInDays).toBe(30);
      const timeout = tagValue(functions[id], 'preview:route') ? 29 : 900;
      expect(props.Timeout).toBeLessThanOrEqual(timeout);
    },
  );

  test.each(Object.keys(functions))('%s has the environment config.ts validates', (id) => {
    // Prepare: deploy-time references become placeholder strings; Lambda sets AWS_REGION.
    const variables = functions[id].Properties.Environment.Variables as Record<string, Json>;
    const env = Object.fromEntries(
      Object.entries(variables).map(([k, v]) => [k, typeof v === 'string' ? v : `resolved:${k}`]),
    );
    // Act
    const config = parseConfig({ ...env, AWS_REGION: 'eu-west-1' });
    // Assess
    expect(config.mode).toBe('aws');
    expect(config.secretNamePrefix).toBe('preview/dev');
    expect(env.NODE_OPTIONS).toBe('--enable-source-maps');
    for (const name of tableNames) {
      expect(mentions(variables[tables[name].envVar], tableLogicalId(name))).toBe(true);
    }
  });
});

describe('routes', () => {
  const methods = Object.values(resourcesOf(template, 'AWS::ApiGateway::Method'));

  test('the API has exactly the methods of the route manifest and its pages', () => {
    const actual = methods.map((m) => `${m.Properties.HttpMethod} ${resourcePath(m.Properties.ResourceId)}`);
    const expected = [
      ...routeIds.map((id) => `${routes[id].method} ${routes[id].path}`),
      ...Object.values(pages).map((p) => `${p.method} ${p.path}`),
    ];
    expect(actual.sort()).toEqual(expected.sort());
  });

  test.each(routeIds)('%s is wired to its own function without an API Gateway authorizer', (id) => {
    const route: RouteDef = routes[id];
    const method = methods.find(
      (m) => m.Properties.HttpMethod === route.method && resourcePath(m.Properties.ResourceId) === route.path,
    );
    expect(method).toBeDefined();
    expect(method.Properties.AuthorizationType).toBe('NONE');
    expect(method.Properties.Integration.Type).toBe('AWS_PROXY');
    expect(method.Properties.Integration.IntegrationHttpMethod).toBe('POST');
    expect(mentions(method.Properties.Integration.Uri, routeFunctionId(id))).toBe(true);
    expect(functions[routeFunctionId(id)].Properties.Description).toBe(`${route.method} ${route.path}`);
  });

  test.each(routeIds)(
    "%s reaches exactly the tables it declares (tenancy read for authentication, its organization's request counters)",
    (id) => {
      const route: RouteDef = routes[id];
      const expected: Partial<Record<TableName, 'R' | 'RW'>> = {
        tenancy: 'R',
        quotas: 'RW',
        ...route.access.tables,
      };
      expect(tableAccess(routeFunctionId(id))).toEqual(expected);
    },
  );

  test.each(routeIds)('%s may start exactly the workflows it declares', (id) => {
    const route: RouteDef = routes[id];
    const fnId = routeFunctionId(id);
    const variables = functions[fnId].Properties.Environment.Variables;
    const starts = statementsOf(template, fnId).filter((s) => s.actions.includes('states:StartExecution'));
    const started = workflowNames.filter((w) =>
      starts.some((s) => s.resources.some((r) => mentions(r, logicalId(stateless.stateMachines[w])))),
    );
    expect(started).toEqual(workflowNames.filter((w) => route.access.starts?.includes(w)));
    for (const workflow of workflowNames) {
      const expected = route.access.starts?.includes(workflow)
        ? { Ref: logicalId(stateless.stateMachines[workflow]) }
        : undefined;
      expect(variables[stateMachineArnEnv[workflow]]).toEqual(expected);
    }
    // Nothing beyond starting: no stop, no describe, no wildcard.
    expect(actionsOf(fnId).filter((a) => a.startsWith('states:'))).toEqual(
      route.access.starts?.length ? ['states:StartExecution'] : [],
    );
  });

  test('getEnvironment cannot write the environments table', () => {
    const envId = tableLogicalId('environments');
    for (const statement of statementsOf(template, routeFunctionId('getEnvironment'))) {
      if (!statement.resources.some((r) => mentions(r, envId))) continue;
      expect(statement.actions.filter((a) => writeActions.includes(a))).toEqual([]);
    }
    expect(tableAccess(routeFunctionId('getEnvironment')).environments).toBe('R');
  });

  test('listRuns cannot touch secret bundles, their metadata or any secret but the run-link key', () => {
    const fnId = routeFunctionId('listRuns');
    expect(tableAccess(fnId).secretBundles).toBeUndefined();
    const secrets = grantsOf(template, fnId).filter((g) =>
      g.actions.some((a) => a.startsWith('secretsmanager:')),
    );
    expect(secrets.map((g) => g.resources)).toEqual([[{ Ref: linkSecretId }]]);
  });

  test.each(routeIds)('%s gets Secrets Manager only as declared (R or RW), under the stage prefix', (id) => {
    const route: RouteDef = routes[id];
    expectSecrets(routeFunctionId(id), route.access.secrets);
  });

  test.each(routeIds)('%s may end callback tasks only if it declares completesTasks', (id) => {
    const route: RouteDef = routes[id];
    const responds = actionsOf(routeFunctionId(id)).filter((a) => taskResponseActions.includes(a));
    expect(responds.sort()).toEqual(route.access.completesTasks ? taskResponseActions : []);
  });
});

describe('template', () => {
  test.each([
    ['without a cluster', template],
    ['with a cluster', synthesize(clusterContext).statelessTemplate],
  ])(
    'has no dependency cycle %s (step functions, the rollout watcher, their policies and the state machines)',
    (_, t) => {
      expect(cyclesOf(t)).toEqual([]);
    },
  );
});

describe('REST API', () => {
  const responses = Object.values(resourcesOf(template, 'AWS::ApiGateway::GatewayResponse'));
  const responseOf = (type: string) => responses.find((r) => r.Properties.ResponseType === type)?.Properties;

  test('an unknown route answers 404 with the service error shape', () => {
    const notFound = responseOf('MISSING_AUTHENTICATION_TOKEN');
    expect(notFound.StatusCode).toBe('404');
    expect(JSON.parse(notFound.ResponseTemplates['application/json'])).toEqual({ error: 'route not found' });
    expect(notFound.ResponseParameters['gatewayresponse.header.Content-Type']).toBe("'application/json'");
  });

  test.each(['DEFAULT_4XX', 'DEFAULT_5XX'])('%s answers {"error": message} as JSON', (type) => {
    const response = responseOf(type);
    const body: string = response.ResponseTemplates['application/json'];
    // messageString is substituted already quoted: the template is JSON once it is.
    expect(JSON.parse(body.replace('$context.error.messageString', '"Forbidden"'))).toEqual({
      error: 'Forbidden',
    });
    expect(response.ResponseParameters['gatewayresponse.header.Content-Type']).toBe("'application/json'");
  });

  test('the stage throttles, traces and keeps access logs without bodies or headers', () => {
    const [stage] = Object.values(resourcesOf(template, 'AWS::ApiGateway::Stage'));
    const props = stage.Properties;
    expect(props.TracingEnabled).toBe(true);
    expect(props.MethodSettings).toEqual([
      expect.objectContaining({
        HttpMethod: '*',
        ResourcePath: '/*',
        DataTraceEnabled: false,
        LoggingLevel: 'OFF',
        // Every organization together (each organization's share is core/fair-share.ts; docs/scale.md).
        ThrottlingRateLimit: 1000,
        ThrottlingBurstLimit: 2000,
      }),
    ]);
    const format: string = props.AccessLogSetting.Format;
    expect(JSON.parse(format.replace('$context.error.messageString', '"x"'))).toHaveProperty('status');
    expect(format).not.toMatch(/body|header|authorization|\$input/i);
  });

  test('outputs the API URL, every table name and every state machine ARN', () => {
    const outputs = template.toJSON().Outputs as Record<string, Json>;
    const values = Object.values(outputs).map((o) => o.Value);
    expect(Object.keys(outputs).some((k) => k.startsWith('ApiUrl'))).toBe(true);
    for (const name of tableNames) expect(values.some((v) => mentions(v, tableLogicalId(name)))).toBe(true);
    for (const name of workflowNames) {
      expect(values).toContainEqual({ Ref: logicalId(stateless.stateMachines[name]) });
    }
  });
});

describe("each organization's fair share", () => {
  const routeDescriptions = new Set(routeIds.map((id) => `${routes[id].method} ${routes[id].path}`));
  const routeEnv = (t: ReturnType<typeof synthesize>['statelessTemplate']) =>
    Object.values(resourcesOf(t, 'AWS::Lambda::Function'))
      .filter((f) => routeDescriptions.has(String(f.Properties.Description)))
      .map((f) => f.Properties.Environment.Variables as Record<string, unknown>);

  test('unset, the route functions use their own defaults (no PREVIEW_ORG_* in their environment)', () => {
    const envs = routeEnv(template);
    expect(envs.length).toBe(routeIds.length);
    for (const env of envs) expect(Object.keys(env).filter((k) => k.startsWith('PREVIEW_ORG_'))).toEqual([]);
  });

  test('context keys set the limits on every route function, and only there', () => {
    const { statelessTemplate } = synthesize({
      orgRequestsPerSecond: '50',
      orgConcurrentDeploys: '5',
      orgConcurrentRuns: '0',
    });
    const envs = routeEnv(statelessTemplate);
    expect(envs.length).toBe(routeIds.length);
    for (const env of envs)
      expect(env).toMatchObject({
        PREVIEW_ORG_REQUESTS_PER_SECOND: '50',
        PREVIEW_ORG_CONCURRENT_DEPLOYS: '5',
        PREVIEW_ORG_CONCURRENT_RUNS: '0',
      });
    const withLimits = Object.values(resourcesOf(statelessTemplate, 'AWS::Lambda::Function')).filter(
      (f) => f.Properties.Environment?.Variables?.PREVIEW_ORG_REQUESTS_PER_SECOND !== undefined,
    );
    expect(withLimits.length).toBe(routeIds.length);
  });

  test('a bad value is refused at synth', () => {
    expect(() => synthesize({ orgRequestsPerSecond: 'lots' })).toThrow(
      /context "orgRequestsPerSecond" must be a number >= 0/,
    );
  });
});
