/**
 * `npm run bench:bundles`: bundle every Lambda (routes, pages, workflow steps, event and schedule targets,
 * workers) exactly as CDK does (lib/cdk/bundling.ts: the same esbuild settings, aliases and external
 * modules), print each bundle's size, raw and gzipped, and the modules shipped beside bundles (shared
 * layers, copied modules); time how long each bundle takes to import in a fresh Node process; report the
 * budget figures through `reportFigure`.
 *
 * `-- --check` (`npm run check:bundles`, part of `npm test`): compare every bundle, layer and copied
 * module set with its entry in test/bench/bundles.budget.json and exit 1 when one is more than
 * `tolerance` (10%) over it or has no entry, naming it. No import timing in that mode.
 * `-- --write-budget`: rewrite the budget file from this build (a deliberate change, reviewed in the diff).
 *
 * Import time: a fresh `node` imports the bundle (`await import()`, timed inside the process: what a cold
 * Lambda pays for the module beyond starting Node) with the function's external modules where Lambda
 * would find them (a layer's under node_modules beside the bundle, as /opt/nodejs/node_modules; copied
 * modules in the bundle's own node_modules), so nothing is left out. The baseline, measured in the same
 * run the same way, is a fresh `node` importing an empty ES module: the ratio compares the whole process
 * (start + import) with it.
 */
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { eventRules, schedules } from '../../functions/manifest/events.js';
import { pages, type RouteAccess, routes } from '../../functions/manifest/routes.js';
import { workers } from '../../functions/manifest/workers.js';
import { workflows } from '../../functions/manifest/workflows.js';
import {
  copiedModulesFor,
  externalModulesFor,
  lambdaEsbuildOptions,
  lambdaLayers,
  layerIds,
  layersFor,
  moduleClosure,
  repoRoot,
} from '../../lib/cdk/bundling.js';
import { ACCESS_VERIFIER_ENTRY } from '../../lib/cdk/constructs/access-verifier.js';
import { writeLayer } from '../../lib/cdk/constructs/shared-layers.js';
import { median, reportFigure } from './report.js';

const args = process.argv.slice(2);
const checkMode = args.includes('--check');
const writeBudget = args.includes('--write-budget');
const budgetPath = join(repoRoot, 'test/bench/bundles.budget.json');

/**
 * Every Lambda entry, with a readable name and its access (which decides its external modules, and whether
 * it calls S3: media or staged source archives, whose budget is larger).
 */
type Access = { browser?: boolean; media?: string; artifacts?: string };
const usesS3 = (access: Access) => access.media !== undefined || access.artifacts !== undefined;
const entries = new Map<string, { name: string; access: Access }>();
const add = (entry: string, name: string, access: object) => {
  if (!entries.has(entry)) entries.set(entry, { name, access: access as Access });
};
for (const [id, r] of Object.entries(routes)) add(r.entry, `route ${id}`, r.access);
for (const [id, p] of Object.entries(pages)) add(p.entry, `page ${id}`, p.access);
/** The folders a page ships beside its bundle (`files`: static files it serves), measured as copied sets. */
const pageFiles = new Map<string, readonly string[]>(
  Object.values(pages).flatMap((p) => ('files' in p && p.files ? [[p.entry, p.files] as const] : [])),
);
for (const w of Object.values(workflows))
  for (const t of Object.values(w.tasks) as { entry: string; access: RouteAccess }[])
    add(t.entry, `step ${t.entry.split('/').pop()}`, t.access);
for (const [id, r] of Object.entries(eventRules)) add(r.target.entry, `event ${id}`, r.target.access);
for (const [id, s] of Object.entries(schedules)) add(s.target.entry, `schedule ${id}`, s.target.access);
for (const [id, w] of Object.entries(workers)) add(w.entry, `worker ${id}`, w.access);
// The front door's access verifier: a function URL of its own construct, in no manifest; reads secrets only.
add(ACCESS_VERIFIER_ENTRY, 'function URL accessVerifier', { secrets: 'R' });

const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;

/**
 * The budget with the AWS SDK v3 clients the design names in every bundle: the median bundle,
 * the largest of the functions that call only JSON-protocol services (DynamoDB, Step Functions, Secrets
 * Manager, CloudWatch Logs, CodeBuild, ECR, EventBridge, Lambda), the largest of those that use S3, and the
 * median import. The SDK is not traded for bytes: a figure over its target is reported, and the SDK stays.
 */
const MEDIAN_KB = 350;
const JSON_ONLY_KB = 425;
const S3_KB = 550;
const IMPORT_MS = 60;
const work = mkdtempSync(join(tmpdir(), 'bench-bundles-'));

/** Total size of the files under a directory (what a zip of it holds, uncompressed). */
function dirBytes(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = statSync(path);
    total += st.isDirectory() ? dirBytes(path) : st.size;
  }
  return total;
}

/** A node_modules holding `modules` and their dependency closure, as the CDK hooks and layers ship it. */
function stageModules(modules: readonly string[], into: string): string {
  for (const dir of moduleClosure(modules)) cpSync(join(repoRoot, dir), join(into, dir), { recursive: true });
  return join(into, 'node_modules');
}

// Shared layers (built as CDK builds them: lib/cdk/constructs/shared-layers.ts) and copied module sets, as Lambda sees them.
const layers = layerIds.map((id) => {
  const dir = join(work, 'layers', id);
  writeLayer(id, dir);
  const nodeModules = join(dir, 'nodejs', 'node_modules');
  return { id, nodeModules, bytes: dirBytes(nodeModules) };
});
const copiedSets = new Map<string, { nodeModules: string; bytes: number }>();

interface Row {
  entry: string;
  name: string;
  raw: number;
  gz: number;
  meta: Metafile;
  dir: string;
  /** What is shipped beside the bundle: layer ids and the copied-module set. */
  beside: string[];
  /** The packages it leaves out (layers, copied): loaded lazily, so timed with the bundle, nothing hidden. */
  external: string[];
  /** It calls S3 (the S3 client, lib-storage or the presigner): the larger budget. */
  s3: boolean;
  importMs?: number;
  wallMs?: number;
}

/** One entry bundled as CDK bundles it (lib/cdk/bundling.ts), in memory, with its metafile. */
function bundle(entry: string, external: string[]) {
  return build({
    entryPoints: [join(repoRoot, entry)],
    absWorkingDir: repoRoot,
    bundle: true,
    platform: 'node',
    write: false,
    metafile: true,
    outfile: 'index.mjs',
    logLevel: 'error',
    ...lambdaEsbuildOptions(),
    external,
  });
}

const started = performance.now();
const rows: Row[] = [];
const queue = [...entries];
async function worker(): Promise<void> {
  for (let next = queue.shift(); next; next = queue.shift()) {
    const [entry, { name, access }] = next;
    const copied = copiedModulesFor(access);
    const layered = layersFor(entry);
    const result = await bundle(entry, externalModulesFor(entry, access));
    const code = result.outputFiles[0]!.contents;
    const dir = join(work, 'fn', entry.replace(/[/.]/g, '_'));
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'index.mjs'), code);
    const beside: string[] = [];
    if (copied.length > 0) {
      const key = copied.join('+');
      if (!copiedSets.has(key)) {
        const nodeModules = stageModules(copied, join(work, 'copied', key.replace(/[/@+]/g, '_')));
        copiedSets.set(key, { nodeModules, bytes: dirBytes(nodeModules) });
      }
      beside.push(`copied ${key}`);
    }
    const files = pageFiles.get(entry);
    if (files) {
      const key = `files ${files.join('+')}`;
      if (!copiedSets.has(key))
        copiedSets.set(key, {
          nodeModules: '',
          bytes: files.reduce((n, d) => n + dirBytes(join(repoRoot, d)), 0),
        });
    }
    beside.push(...layered.map((id) => `layer ${id}`));
    rows.push({
      entry,
      name,
      raw: code.length,
      gz: gzipSync(code).length,
      meta: result.metafile,
      dir,
      beside,
      external: externalModulesFor(entry, access),
      s3: usesS3(access),
    });
  }
}
await Promise.all([worker(), worker(), worker()]);

/**
 * The SDK reference (test/bench/fixtures/sdk-reference.ts: the SDK's DynamoDB document client alone, as
 * `ddb()` builds it), built the same way: the floor every bundle carries.
 */
const sdkRefEntry = 'test/bench/fixtures/sdk-reference.ts';
const sdkRefBuild = await bundle(sdkRefEntry, []);
const sdkRef = {
  raw: sdkRefBuild.outputFiles[0]!.contents.length,
  file: join(work, 'sdk-reference.mjs'),
  importMs: 0,
};
writeFileSync(sdkRef.file, sdkRefBuild.outputFiles[0]!.contents);

/** node_modules beside a bundle: its copied modules, else its layer's (one layer per function today). */
function linkModules(row: Row): void {
  const copied = row.beside.find((b) => b.startsWith('copied '))?.slice('copied '.length);
  const layer = row.beside.find((b) => b.startsWith('layer '))?.slice('layer '.length);
  if (copied && layer)
    throw new Error(`${row.name}: copied modules and a layer: measure both before allowing it`);
  const target = copied
    ? copiedSets.get(copied)!.nodeModules
    : layers.find((l) => l.id === layer)?.nodeModules;
  if (target) symlinkSync(target, join(row.dir, 'node_modules'), 'dir');
}

/**
 * Fresh-process import: [ms inside the process for `await import()` of the bundle (then of `also`, bare
 * specifiers resolved from the bundle's directory: the layer packages it loads on first use), wall ms of
 * the whole process].
 */
function timeImport(file: string, also: readonly string[] = []): [number, number] {
  // On Node < 22.19 (this machine may have Node 20) @kubernetes/client-node's undici needs the stand-ins
  // functions/ports/runtime/eks/client.ts `loadClient` installs before loading it; installed the same way
  // here, before the clock starts (no-ops on Lambda's Node 22).
  const script =
    "import{createRequire}from'node:module';import zlib from'node:zlib';import wt from'node:worker_threads';" +
    "if(typeof zlib.createZstdDecompress!=='function')zlib.createZstdDecompress=()=>{throw new Error('zstd')};" +
    "if(typeof wt.markAsUncloneable!=='function')wt.markAsUncloneable=()=>{};" +
    'Promise.withResolvers??=function(){let a,b;const p=new this((x,y)=>{a=x;b=y});return{promise:p,resolve:a,reject:b}};' +
    'const t=performance.now();await import(process.argv[1]);' +
    'const r=createRequire(process.argv[1]);' +
    'for(const p of process.argv.slice(2))await import(r.resolve(p));' +
    'process.stdout.write(String(performance.now()-t));process.exit(0)';
  const t0 = performance.now();
  const out = spawnSync(process.execPath, ['--input-type=module', '-e', script, file, ...also], {
    encoding: 'utf8',
    // No AWS settings: importing must not need any (clients are created on first use).
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
  });
  const wall = performance.now() - t0;
  if (out.status !== 0) throw new Error(`importing ${file} failed:\n${out.stderr}`);
  return [Number(out.stdout), wall];
}

const RUNS = 3;
let baseline = { importMs: 0, wallMs: 0 };
if (!checkMode) {
  const empty = join(work, 'empty.mjs');
  writeFileSync(empty, '');
  for (const r of rows) linkModules(r);
  // Interleave the baseline with the bundles, so machine noise hits both alike.
  const baseRuns: [number, number][] = [];
  const sdkRefRuns: number[] = [];
  const runs = new Map<Row, [number, number][]>();
  for (let i = 0; i < RUNS; i++) {
    for (const [n, r] of rows.entries()) {
      if (n % 3 === 0) baseRuns.push(timeImport(empty));
      if (n % 3 === 1) sdkRefRuns.push(timeImport(sdkRef.file)[0]);
      runs.set(r, [...(runs.get(r) ?? []), timeImport(join(r.dir, 'index.mjs'), r.external)]);
    }
  }
  baseline = { importMs: median(baseRuns.map((x) => x[0])), wallMs: median(baseRuns.map((x) => x[1])) };
  sdkRef.importMs = median(sdkRefRuns);
  for (const [r, xs] of runs) {
    r.importMs = median(xs.map((x) => x[0]));
    r.wallMs = median(xs.map((x) => x[1]));
  }
}

rows.sort((a, b) => b.raw - a.raw);
const ms = (n?: number) => (n === undefined ? '' : `${n.toFixed(1)} ms`);
console.log(
  `${'function'.padEnd(38)} ${'minified'.padStart(9)} ${'gzip'.padStart(7)} ${checkMode ? '' : 'import'.padStart(9)}  shipped beside`,
);
for (const r of rows)
  console.log(
    `${r.name.padEnd(38)} ${kb(r.raw).padStart(9)} ${kb(r.gz).padStart(7)} ${ms(r.importMs).padStart(9)}  ${r.beside.join(', ')}`,
  );
for (const l of layers)
  console.log(`layer ${l.id.padEnd(32)} ${kb(l.bytes).padStart(9)} (node_modules, unminified)`);
for (const [key, s] of copiedSets)
  console.log(`copied ${key.padEnd(31)} ${kb(s.bytes).padStart(9)} (node_modules)`);

const raws = rows.map((r) => r.raw).sort((a, b) => a - b);
const medianBytes = median(raws);
const largest = rows[0]!;
console.log(
  `\n${rows.length} bundles in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
    `median ${kb(medianBytes)}, largest ${kb(largest.raw)} (${largest.name}); ` +
    `the SDK reference (${sdkRefEntry}, the SDK's DynamoDB document client alone) ${kb(sdkRef.raw)}`,
);
const byPackage = new Map<string, number>();
for (const [file, info] of Object.entries(Object.values(largest.meta.outputs)[0]!.inputs)) {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1] ?? '(this project)';
  byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + info.bytesInOutput);
}
console.log(`largest (${largest.name}) by package:`);
for (const [pkg, bytes] of [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 8))
  console.log(`  ${pkg.padEnd(40)} ${kb(bytes).padStart(8)}`);

/** What the budget file holds: bytes per bundle (by entry), per layer, per copied-module set. */
interface Budget {
  about: string;
  tolerance: number;
  bundles: Record<string, number>;
  layers: Record<string, number>;
  copiedModules: Record<string, number>;
}
const measured: Omit<Budget, 'about' | 'tolerance'> = {
  bundles: Object.fromEntries(
    [...rows].sort((a, b) => a.entry.localeCompare(b.entry)).map((r) => [r.entry, r.raw]),
  ),
  layers: Object.fromEntries(layers.map((l) => [l.id, l.bytes])),
  copiedModules: Object.fromEntries([...copiedSets].map(([k, s]) => [k, s.bytes])),
};

rmSync(work, { recursive: true, force: true });

if (writeBudget) {
  const budget: Budget = {
    about:
      'Bytes of each Lambda bundle (minified, by entry), shared layer and copied-module set, as `npm run ' +
      'bench:bundles` measures them. `npm run check:bundles` (in `npm test`) fails when one is more than ' +
      '`tolerance` over its entry or has none. Rewrite with `npm run bench:bundles -- --write-budget` when ' +
      'a growth is deliberate, and say why in the commit.',
    tolerance: 0.1,
    ...measured,
  };
  writeFileSync(budgetPath, `${JSON.stringify(budget, null, 2)}\n`);
  console.log(`\nwrote ${budgetPath}`);
}

if (checkMode) {
  const budget = JSON.parse(readFileSync(budgetPath, 'utf8')) as Budget;
  const failures: string[] = [];
  const stale: string[] = [];
  for (const kind of ['bundles', 'layers', 'copiedModules'] as const) {
    for (const [key, bytes] of Object.entries(measured[kind])) {
      const allowed = budget[kind]?.[key];
      if (allowed === undefined) failures.push(`${kind} ${key}: ${kb(bytes)}, no budget entry`);
      else if (bytes > allowed * (1 + budget.tolerance))
        failures.push(
          `${kind} ${key}: ${kb(bytes)} is ${(((bytes - allowed) / allowed) * 100).toFixed(1)}% over its budget of ${kb(allowed)} (tolerance ${budget.tolerance * 100}%)`,
        );
    }
    for (const key of Object.keys(budget[kind] ?? {}))
      if (!(key in measured[kind])) stale.push(`${kind} ${key}`);
  }
  // A layer's packages belong in exactly the bundles of its functions: bundled elsewhere means a handler
  // reaches them without the layer; not imported by a layered function means it no longer needs it.
  for (const r of rows) {
    const output = Object.values(r.meta.outputs)[0]!;
    for (const id of layerIds) {
      const layered = layersFor(r.entry).includes(id);
      for (const pkg of lambdaLayers[id].packages) {
        const bundled = Object.keys(output.inputs).some((f) => f.includes(`node_modules/${pkg}/`));
        const imported = output.imports.some((i) => i.external && i.path === pkg);
        if (bundled)
          failures.push(`${r.name} bundles ${pkg}: give ${r.entry} the ${id} layer (lib/cdk/bundling.ts)`);
        if (layered && !imported)
          failures.push(`${r.name} has the ${id} layer but never imports ${pkg}: take it off the layer`);
      }
    }
  }
  if (stale.length) console.log(`\nbudget entries no build has any more (remove them): ${stale.join(', ')}`);
  if (failures.length) {
    console.error(`\nbundle budget exceeded (${budgetPath}):\n  ${failures.join('\n  ')}`);
    process.exit(1);
  }
  console.log(
    `\nevery bundle, layer and copied-module set is within ${budget.tolerance * 100}% of its budget`,
  );
} else {
  const importMedian = median(rows.map((r) => r.importMs!));
  const wallMedian = median(rows.map((r) => r.wallMs!));
  const ratio = wallMedian / baseline.wallMs;
  const ratioLimit = (baseline.wallMs + IMPORT_MS) / baseline.wallMs;
  const besideRows = rows.filter((r) => r.beside.length > 0);
  console.log(
    `\nimport (fresh node, in-process): median ${importMedian.toFixed(1)} ms over ${rows.length} bundles; ` +
      `empty module ${baseline.importMs.toFixed(2)} ms; the SDK reference (its DynamoDB document client alone) ` +
      `${sdkRef.importMs.toFixed(1)} ms; whole process median ${wallMedian.toFixed(0)} ms vs ` +
      `${baseline.wallMs.toFixed(0)} ms for the empty module`,
  );
  console.log(
    `import of the bundle then of the packages shipped beside it: ${besideRows
      .map((r) => `${r.name} ${r.importMs!.toFixed(1)} ms (${r.beside.join(', ')})`)
      .join('; ')}`,
  );
  const largestOf = (s3: boolean) => rows.filter((r) => r.s3 === s3).sort((a, b) => b.raw - a.raw)[0]!;
  const apart = [
    ...layers.map((l) => `layer ${l.id} ${kb(l.bytes)}`),
    ...[...copiedSets].map(([k, s]) => `copied ${k} ${kb(s.bytes)}`),
  ].join(', ');
  reportFigure({
    name: 'bundles / median minified size',
    measured: Math.round(medianBytes / 1024),
    target: `≤ ${MEDIAN_KB} KB`,
    ok: medianBytes <= MEDIAN_KB * 1024,
    unit: 'KB',
    detail: `${rows.length} bundles, each with the SDK v3 clients of the services it calls; the SDK reference, a bundle of the SDK's DynamoDB document client alone: ${kb(sdkRef.raw)} (median ${(medianBytes / sdkRef.raw).toFixed(2)}× it)`,
  });
  for (const [s3, limit, what] of [
    [false, JSON_ONLY_KB, 'functions that call only JSON-protocol services'],
    [true, S3_KB, 'functions that use S3'],
  ] as const) {
    const top = largestOf(s3);
    reportFigure({
      name: `bundles / largest minified size, ${what}`,
      measured: Math.round(top.raw / 1024),
      target: `≤ ${limit} KB`,
      ok: top.raw <= limit * 1024,
      unit: 'KB',
      detail: `${top.name} (${rows.filter((r) => r.s3 === s3).length} bundles); layers and copied modules apart: ${apart}`,
    });
  }
  reportFigure({
    name: 'bundles / median import time',
    measured: Number(importMedian.toFixed(1)),
    target: `≤ ${IMPORT_MS} ms`,
    ok: importMedian <= IMPORT_MS,
    unit: 'ms',
    detail: `fresh node, await import() timed in-process, median of ${RUNS} runs each; functions with layers or copied modules timed importing those packages too; the SDK reference (its DynamoDB document client alone) ${sdkRef.importMs.toFixed(1)} ms (median ${(importMedian / sdkRef.importMs).toFixed(2)}× it)`,
  });
  reportFigure({
    name: 'bundles / median import process vs empty module',
    measured: Number(ratio.toFixed(2)),
    target: `≤ ${ratioLimit.toFixed(2)}× (${IMPORT_MS} ms over the empty-module process)`,
    ok: ratio <= ratioLimit,
    unit: '×',
    detail: `${wallMedian.toFixed(0)} vs ${baseline.wallMs.toFixed(0)} ms (node start + import of the bundle vs of an empty ES module, same run)`,
  });
  for (const r of besideRows)
    reportFigure({
      name: `bundles / import with what is shipped beside: ${r.name}`,
      measured: Number(r.importMs!.toFixed(1)),
      target: '— (loaded on first use, not on import; the median is the target)',
      ok: r.importMs! <= IMPORT_MS,
      unit: 'ms',
      detail: `bundle ${kb(r.raw)} + ${r.beside.join(', ')}`,
      informational: true,
    });
}
