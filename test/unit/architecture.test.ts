import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { workflows } from '../../functions/manifest/workflows.js';
import { STEP_ERROR_NAMES } from '../../functions/shared/step-errors.js';

/*
 * The house rules of functions/README.md, checked on every `npm test`: imports run down the floors, never
 * up; Lambda code never loads a local adapter; use cases see ports only through their contracts; the
 * state machines retry and catch only error names some code throws.
 */

const ROOT = resolve(new URL('../..', import.meta.url).pathname);

/** Floors, bottom (0) to top. A file may import its own floor or a lower one. */
function floorOf(file: string): { floor: number; name: string } | undefined {
  const rules: [RegExp, number, string][] = [
    [/^functions\/manifest\//, 0, 'manifest'],
    [/^functions\/shared\//, 1, 'shared'],
    [/^functions\/ports\//, 2, 'ports'],
    [/^functions\/core\//, 3, 'core'],
    [/^functions\/(api|steps|events|watchers)\//, 4, 'handlers'],
    [/^lib\//, 5, 'lib'],
    [/^bin\//, 6, 'bin'],
  ];
  for (const [re, floor, name] of rules) if (re.test(file)) return { floor, name };
  return undefined;
}

const isTestCode = (file: string) => /\.(test|contract)\.ts$/.test(file) || file.startsWith('test/');
/** A local adapter: `ports/<port>/local-<x>.ts`, or anything under an adapter family's `local/` folder. */
const isLocalAdapter = (file: string) => /^functions\/ports\/[^/]+\/(local-[^/]+|local\/.+)\.ts$/.test(file);
const isPortContract = (file: string) => /^functions\/ports\/[^/]+\/port\.ts$/.test(file);

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(ROOT, rel)).isDirectory()) return sourceFiles(rel);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

/** Every relative import of a file (static, dynamic and re-exports), as repository paths of .ts files. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
  return specs.map((s) => relative(ROOT, resolve(ROOT, dirname(file), s)).replace(/\.js$/, '.ts'));
}

const product = ['functions', 'lib', 'bin'].flatMap(sourceFiles).filter((f) => !isTestCode(f));
const edges = product.flatMap((from) => importsOf(from).map((to) => ({ from, to })));

describe('import direction', () => {
  test('the scan sees the tree (a broken scan would pass every rule below)', () => {
    expect(product.length).toBeGreaterThan(50);
    expect(edges.length).toBeGreaterThan(150);
    expect(edges).toContainEqual({
      from: 'functions/core/environments/lifecycle.ts',
      to: 'functions/manifest/tables.ts',
    });
  });

  test('no import runs up a floor (manifest < shared < ports < core < api, steps < lib < bin)', () => {
    const upward = edges.filter(({ from, to }) => {
      const a = floorOf(from);
      const b = floorOf(to);
      return a && b && b.floor > a.floor;
    });
    expect(upward.map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  test('product code never imports test code', () => {
    expect(edges.filter(({ to }) => isTestCode(to)).map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  test('HTTP handlers, state-machine steps and event handlers do not import each other', () => {
    const crossing = edges.filter(
      ({ from, to }) =>
        /^functions\/(api|steps|events|watchers)\//.test(from) &&
        /^functions\/(api|steps|events|watchers)\//.test(to) &&
        from.split('/')[1] !== to.split('/')[1],
    );
    expect(crossing.map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  test('only lib/ (the local host) loads local adapters: no Lambda bundle contains one', () => {
    const leaks = edges.filter(
      ({ from, to }) => isLocalAdapter(to) && from.startsWith('functions/') && !isLocalAdapter(from),
    );
    expect(leaks.map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  test('use cases see ports only through their contracts (adapters come in as arguments)', () => {
    const direct = edges.filter(
      ({ from, to }) =>
        from.startsWith('functions/core/') && to.startsWith('functions/ports/') && !isPortContract(to),
    );
    expect(direct.map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  test('the manifests import nothing but each other', () => {
    const out = edges.filter(
      ({ from, to }) => from.startsWith('functions/manifest/') && !to.startsWith('functions/manifest/'),
    );
    expect(out.map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });
});

describe('state machines and step errors agree', () => {
  const asl = Object.values(workflows).map((w) => ({
    file: w.definition,
    doc: JSON.parse(readFileSync(join(ROOT, w.definition), 'utf8')) as {
      States: Record<
        string,
        { Type: string; Retry?: { ErrorEquals: string[] }[]; Catch?: { ErrorEquals: string[] }[] }
      >;
    },
  }));

  test('every ErrorEquals name is a Step Functions name or one the code throws', () => {
    const unknown: string[] = [];
    for (const { file, doc } of asl)
      for (const [name, state] of Object.entries(doc.States))
        for (const rule of [...(state.Retry ?? []), ...(state.Catch ?? [])])
          for (const error of rule.ErrorEquals)
            if (!/^(States|Lambda)\./.test(error) && !STEP_ERROR_NAMES.includes(error))
              unknown.push(`${file} ${name}: ${error}`);
    expect(unknown).toEqual([]);
  });

  test("a run's MarkFailed retries every error (States.ALL, last): a run it cannot end would stay running", () => {
    const run = asl.find((a) => a.file.includes('test-run'))!;
    const retry = run.doc.States.MarkFailed!.Retry ?? [];
    expect(retry.at(-1)?.ErrorEquals).toEqual(['States.ALL']);
  });

  test('every Task retries TransientError, and every Task but MarkFailed ends quietly on Superseded', () => {
    for (const { file, doc } of asl)
      for (const [name, state] of Object.entries(doc.States)) {
        if (state.Type !== 'Task') continue;
        expect([
          file,
          name,
          (state.Retry ?? []).some((r) => r.ErrorEquals.includes('TransientError')),
        ]).toEqual([file, name, true]);
        if (name === 'MarkFailed') continue;
        expect([file, name, (state.Catch ?? []).some((c) => c.ErrorEquals.includes('Superseded'))]).toEqual([
          file,
          name,
          true,
        ]);
      }
  });
});
