/**
 * `npm run bench:bundles`: bundle every Lambda (15 routes + the workflow steps) exactly as CDK does and
 * print each bundle's size, raw and gzipped, and what the largest is made of.
 */
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { routes } from '../../functions/manifest/routes.js';
import { workflows } from '../../functions/manifest/workflows.js';
import { lambdaBundling } from '../../lib/cdk/bundling.js';

const entries = new Map<string, string>();
for (const [id, r] of Object.entries(routes)) entries.set(r.entry, `route ${id}`);
for (const w of Object.values(workflows)) {
  for (const t of Object.values(w.tasks) as { entry: string }[])
    entries.set(t.entry, `step ${t.entry.split('/').pop()}`);
}

const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;
const rows: { name: string; raw: number; gz: number; meta: Metafile }[] = [];
const started = performance.now();
for (const [entry, name] of entries) {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    write: false,
    metafile: true,
    outfile: 'index.mjs',
    logLevel: 'error',
    format: lambdaBundling.format,
    target: lambdaBundling.target,
    minify: lambdaBundling.minify,
    mainFields: [...lambdaBundling.mainFields],
    banner: { js: lambdaBundling.banner },
  });
  const code = result.outputFiles[0]!.contents;
  rows.push({ name, raw: code.length, gz: gzipSync(code).length, meta: result.metafile });
}
rows.sort((a, b) => b.raw - a.raw);
console.log(`${'function'.padEnd(42)} ${'minified'.padStart(10)} ${'gzip'.padStart(8)}`);
for (const r of rows) console.log(`${r.name.padEnd(42)} ${kb(r.raw).padStart(10)} ${kb(r.gz).padStart(8)}`);
const raws = rows.map((r) => r.raw).sort((a, b) => a - b);
console.log(
  `\n${rows.length} bundles in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
    `median ${kb(raws[Math.floor(raws.length / 2)]!)}, largest ${kb(raws.at(-1)!)}`,
);
const byPackage = new Map<string, number>();
for (const [file, info] of Object.entries(Object.values(rows[0]!.meta.outputs)[0]!.inputs)) {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1] ?? '(this project)';
  byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + info.bytesInOutput);
}
console.log(`\nlargest (${rows[0]!.name}) by package:`);
for (const [pkg, bytes] of [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 8)) {
  console.log(`  ${pkg.padEnd(40)} ${kb(bytes).padStart(8)}`);
}
