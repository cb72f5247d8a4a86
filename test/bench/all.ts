/**
 * `npm run bench`: every benchmark with a target in one run, each figure printed beside its target.
 *
 * Runs each benchmark script as a child process (`npm run bench:<name>`, or `tsx test/bench/<name>.ts`
 * when package.json has no such script but the file exists), one after the other so they do not compete
 * for this shared machine's CPUs, streams its output, and collects its `BENCH-RESULT` lines
 * (test/bench/report.ts). At the end: one table of figure, measured, target, pass/fail and detail. A script
 * that does not exist yet is a `not found` row; a script that fails without reporting a figure is a
 * failed row. Exit 1 when any figure fails or any script is missing or broken.
 *
 *   npm run bench                  every default benchmark (the memory soak takes BENCH_MEMORY_MINUTES, ~10)
 *   npm run bench -- poll startup  a subset, by name (any bench:<name> script, e.g. pipeline or runs)
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Figure, parseFigures } from './report.js';

const REPO_ROOT = resolve(new URL('../..', import.meta.url).pathname);
/** The default set, in this order (cheap first). bench:pipeline and bench:runs measure other things. */
const DEFAULT = ['startup', 'bundles', 'poll', 'listing', 'secrets', 'memory'];

interface Row {
  script: string;
  figure: string;
  measured: string;
  target: string;
  verdict: 'PASS' | 'FAIL' | 'INFO' | 'NOT FOUND' | 'ERROR';
  detail: string;
}

const scripts = (
  JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  }
).scripts;

/** How to run benchmark `name`: its npm script, or its file with tsx, or undefined (not found). */
function commandOf(name: string): [string, string[]] | undefined {
  if (scripts[`bench:${name}`]) return ['npm', ['run', '--silent', `bench:${name}`]];
  const file = join('test', 'bench', `${name}.ts`);
  if (existsSync(join(REPO_ROOT, file))) return [join(REPO_ROOT, 'node_modules', '.bin', 'tsx'), [file]];
  return undefined;
}

/** Run one script, streaming its output; its exit code and everything it printed to stdout. */
function run(command: string, args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((ok) => {
    const child = spawn(command, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c;
      process.stdout.write(c);
    });
    child.once('error', (err) => {
      stdout += `\n${err.message}\n`;
      ok({ code: 1, stdout });
    });
    child.once('close', (code, signal) => ok({ code: code ?? (signal ? 128 : 1), stdout }));
  });
}

const fmt = (f: Figure) => `${Number.isInteger(f.measured) ? f.measured : f.measured.toFixed(2)} ${f.unit}`;

const asked = process.argv.slice(2).map((a) => a.replace(/^bench:/, ''));
const names = asked.length ? asked : DEFAULT;
const rows: Row[] = [];
for (const name of names) {
  const command = commandOf(name);
  if (!command) {
    rows.push({
      script: name,
      figure: '—',
      measured: '—',
      target: '—',
      verdict: 'NOT FOUND',
      detail: `no bench:${name} script in package.json and no test/bench/${name}.ts`,
    });
    continue;
  }
  console.log(`\n=== bench:${name}: ${[command[0].replace(`${REPO_ROOT}/`, ''), ...command[1]].join(' ')}`);
  const started = performance.now();
  const { code, stdout } = await run(...command);
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  let figures: Figure[] = [];
  let parseError: string | undefined;
  try {
    figures = parseFigures(stdout);
  } catch (err) {
    parseError = (err as Error).message;
  }
  for (const f of figures)
    rows.push({
      script: name,
      figure: f.name,
      measured: fmt(f),
      target: f.target,
      verdict: f.informational ? 'INFO' : f.ok ? 'PASS' : 'FAIL',
      detail: f.detail ?? '',
    });
  const error = (detail: string) =>
    rows.push({ script: name, figure: '—', measured: '—', target: '—', verdict: 'ERROR', detail });
  if (!figures.length || parseError)
    error(
      parseError
        ? `unreadable BENCH-RESULT line: ${parseError}`
        : `exited ${code} after ${seconds} s without a BENCH-RESULT line`,
    );
  else if (code !== 0 && figures.every((f) => f.ok || f.informational))
    error(`exited ${code} after ${seconds} s although every figure it reported passed`);
}

const header: Row = {
  script: 'script',
  figure: 'figure',
  measured: 'measured',
  target: 'target',
  verdict: 'PASS' as const,
  detail: 'detail',
};
const columns = ['script', 'figure', 'measured', 'target', 'verdict'] as const;
const width = Object.fromEntries(
  columns.map((c) => [
    c,
    Math.max(...[...rows, header].map((r) => (c === 'verdict' && r === header ? 7 : r[c].length))),
  ]),
) as Record<(typeof columns)[number], number>;
const line = (r: Row, verdict: string) =>
  `${r.script.padEnd(width.script)}  ${r.figure.padEnd(width.figure)}  ${r.measured.padStart(width.measured)}  ` +
  `${r.target.padEnd(width.target)}  ${verdict.padEnd(width.verdict)}  ${r.detail}`;
console.log('\n=== benchmarks: every figure beside its target (ratios measured in the same run)\n');
console.log(line(header, 'verdict'));
console.log('-'.repeat(Math.min(200, line(header, 'verdict').length + 40)));
for (const r of rows) console.log(line(r, r.verdict));
const counted = rows.filter((r) => r.verdict !== 'INFO');
const failed = counted.filter((r) => r.verdict !== 'PASS');
console.log(
  `\n${counted.length - failed.length} of ${counted.length} pass` +
    (failed.length ? `; not passing: ${failed.map((r) => `${r.figure} (${r.verdict})`).join(', ')}` : '') +
    `; ${rows.length - counted.length} informational (INFO) not counted`,
);
process.exitCode = failed.length ? 1 : 0;
