import { describe, expect, test } from '@jest/globals';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { build } from 'esbuild';
import { type TableName, tableNames } from '../../functions/manifest/tables.js';
import { externalModulesFor, lambdaEsbuildOptions } from '../../lib/cdk/bundling.js';
import { declaredFunctions, type Json, mentions, repoRoot, statementsOf, synthesize } from './synth.js';

/*
 * What each function's code reaches, against what its function is given. Every Lambda entry is bundled as
 * CDK bundles it (lib/cdk/bundling.ts: the same esbuild settings, but unminified so that names survive;
 * tree shaking keeps the code its handler links, whatever the module layout), and the bundle is read for:
 *  - the tables it names: `table("runs")` (shared/aws/dynamo.ts, the one way a table name is found). Each
 *    must be reachable by the function's role: some DynamoDB statement on that table;
 *  - the settings its getters require: `required(c.…, "ARTIFACTS_BUCKET")` (registry/adapters.ts, the
 *    registry's one way to need a variable). Each must be in the function's environment.
 * The manifests' `access` entries decide both, so a use case that starts reading a table, or a getter that
 * starts needing a setting, fails here until the manifest says so (in AWS it fails only at run time:
 * AccessDenied, or a ConfigError on every invocation). Static, so an over-approximation: code a handler
 * links but does not run also counts.
 */

const { stateful, stateless, statelessTemplate: template } = synthesize();
const resources = template.toJSON().Resources as Record<string, Json>;
const tableLogicalId = (name: TableName) =>
  stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);
const declared = declaredFunctions(stateless);

/** The tables a function's role reaches with any DynamoDB action. */
function grantedTables(functionId: string): Set<TableName> {
  const out = new Set<TableName>();
  for (const statement of statementsOf(template, functionId)) {
    if (!statement.actions.some((a) => a.startsWith('dynamodb:'))) continue;
    for (const name of tableNames)
      if (statement.resources.some((r) => mentions(r, tableLogicalId(name)))) out.add(name);
  }
  return out;
}

/** The function's bundle as CDK builds it, unminified. */
async function bundleOf(entry: string, access: { browser?: boolean }): Promise<string> {
  const result = await build({
    entryPoints: [`${repoRoot}/${entry}`],
    absWorkingDir: repoRoot,
    bundle: true,
    platform: 'node',
    write: false,
    outfile: 'index.mjs',
    logLevel: 'error',
    ...lambdaEsbuildOptions(),
    minify: false,
    external: externalModulesFor(entry, access),
  });
  return result.outputFiles[0]!.text;
}

/** What a bundle reaches: tables by `table("…")`, settings by `required(…, "…")` (esbuild may suffix names). */
function reachedBy(code: string): { tables: string[]; settings: string[] } {
  const all = (re: RegExp) => [...new Set([...code.matchAll(re)].map((m) => m[1]!))].sort();
  return {
    tables: all(/\btable\d*\("(\w+)"\)/g),
    settings: all(/\brequired\d*\([^;]*?,\s*"([A-Z][A-Z0-9_]*)"\)/g),
  };
}

// Bundled once for the file (esbuild runs them side by side).
const reached = new Map(
  await Promise.all(
    declared.map(async ([, fn]) => [fn.id, reachedBy(await bundleOf(fn.fn.entry, fn.access))] as const),
  ),
);

describe('what each function reaches, it is given', () => {
  test('the scan reads both forms (a bundle of the forms themselves)', () => {
    expect(
      reachedBy(
        'const a = table("runs"); x(table2("builds")); required(c.runs.mediaBucket, "MEDIA_BUCKET");',
      ),
    ).toEqual({ tables: ['builds', 'runs'], settings: ['MEDIA_BUCKET'] });
    // And reads real bundles: what a deploy request and the image-build completion reach.
    const of = (name: string) => reached.get(declared.find(([n]) => n === name)![1].id)!;
    expect(of('route createEnvironment').tables).toEqual([
      'applications',
      'environments',
      'quotas',
      'tenancy',
    ]);
    expect(of('event target imageBuildFinished')).toEqual({
      tables: ['applications', 'builds', 'environments'],
      settings: ['IMAGE_BUILD_PROJECT', 'IMAGE_REPOSITORY_URI'],
    });
    expect(of('worker rolloutWatcher').tables).toEqual([]); // the cluster and Step Functions only
  });

  test.each(declared)('%s: every table its code names is granted to its role', (_, fn) => {
    const granted = grantedTables(fn.id);
    const missing = reached.get(fn.id)!.tables.filter((t) => !granted.has(t as TableName));
    expect(missing).toEqual([]);
  });

  test.each(declared)('%s: every setting its getters require is in its environment', (_, fn) => {
    const env = (resources[fn.id].Properties.Environment?.Variables ?? {}) as Record<string, Json>;
    const missing = reached.get(fn.id)!.settings.filter((name) => env[name] === undefined);
    expect(missing).toEqual([]);
  });
});
