import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { workflows } from '../../functions/manifest/workflows.js';
import { STEP_ERROR_NAMES } from '../../functions/shared/step-errors.js';

/*
 * The house rules of functions/README.md, checked on every `npm test`: imports run down the floors, never
 * up, and never close a circle; a domain of core/ is reached through its front; Lambda code never loads a
 * local adapter; use cases see ports only through their contracts; no folder grows past what a reader
 * takes in at once, and the README's map names every folder; the state machines retry and catch only
 * error names some code throws. Each rule is a function, run on the tree and on a planted breach.
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

function sourceFiles(dir: string, root = ROOT): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) return sourceFiles(rel, root);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

/**
 * Every relative import of a file (static, dynamic, type-only and re-exports), as repository paths of .ts
 * files.
 */
function importsOf(file: string, root = ROOT): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
  return specs.map((s) => relative(root, resolve(root, dirname(file), s)).replace(/\.js$/, '.ts'));
}

type Edge = { from: string; to: string };

/**
 * The import circles among `edges`: each strongly connected set of files (Tarjan), as one circle through
 * all of them that starts and ends at its first file (`a → b → a`), sorted. Type-only imports count: a
 * circle of types still ties the files' designs together, and the next value import closes it for real.
 */
function importCycles(edges: Edge[]): string[] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const sets: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const set: string[] = [];
    for (let w = stack.pop()!; ; w = stack.pop()!) {
      onStack.delete(w);
      set.push(w);
      if (w === v) break;
    }
    if (set.length > 1 || (next.get(v) ?? []).includes(v)) sets.push(set.sort());
  };
  for (const v of [...next.keys()].sort()) if (!index.has(v)) visit(v);
  /** A shortest circle from the set's first file back to it, inside the set (breadth first). */
  const circle = (set: string[]): string => {
    const inSet = new Set(set);
    const start = set[0]!;
    const cameFrom = new Map<string, string>();
    const queue = [start];
    for (let i = 0; i < queue.length; i++) {
      const v = queue[i]!;
      for (const w of next.get(v) ?? []) {
        if (!inSet.has(w)) continue;
        if (w === start) {
          const path = [start];
          for (let u: string | undefined = v; u !== start && u !== undefined; u = cameFrom.get(u))
            path.splice(1, 0, u);
          return [...path, start].join(' → ');
        }
        if (!cameFrom.has(w)) {
          cameFrom.set(w, v);
          queue.push(w);
        }
      }
    }
    return set.join(' → ');
  };
  return sets.map(circle).sort();
}

/** The domain of core/ a file belongs to (`functions/core/<domain>/…`), if any. */
const domainOf = (file: string) => /^functions\/core\/([^/]+)\//.exec(file)?.[1];

/**
 * Imports that reach into a domain of core/ other than through its front: from a handler, step, event
 * handler or watcher, from lib/ or bin/, or from another domain, an import of `functions/core/<domain>/X`
 * where X is not the front (`index.ts`). Another domain may also import the domain's `types.ts` (what
 * two domains share, so that no circle forms); files of one domain import each other directly.
 */
function frontBreaches(edges: Edge[]): Edge[] {
  return edges.filter(({ from, to }) => {
    const target = domainOf(to);
    if (!target || domainOf(from) === target) return false;
    const inner = to.slice(`functions/core/${target}/`.length);
    if (inner === 'index.ts') return false;
    return !(from.startsWith('functions/core/') && inner === 'types.ts');
  });
}

/** At most this many source files (.ts, tests and contract suites aside) directly in a folder of functions/. */
const MAX_FILES_PER_FOLDER = 15;

/** Folders holding more than `max` source files directly, with their count. */
function crowdedFolders(files: string[], max = MAX_FILES_PER_FOLDER): string[] {
  const count = new Map<string, number>();
  for (const f of files.filter((f) => !isTestCode(f)))
    count.set(dirname(f), (count.get(dirname(f)) ?? 0) + 1);
  return [...count].filter(([, n]) => n > max).map(([dir, n]) => `${dir}: ${n} source files`);
}

const product = ['functions', 'lib', 'bin'].flatMap((d) => sourceFiles(d)).filter((f) => !isTestCode(f));
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

describe('no import circle', () => {
  test('no file of functions/, lib/ or bin/ imports itself back, type-only imports included', () => {
    expect(importCycles(edges)).toEqual([]);
  });

  test('a planted circle is found (in memory): each circle once, named by its files', () => {
    const planted: Edge[] = [
      { from: 'a.ts', to: 'b.ts' },
      { from: 'b.ts', to: 'c.ts' },
      { from: 'c.ts', to: 'a.ts' },
      { from: 'c.ts', to: 'd.ts' },
      { from: 'd.ts', to: 'e.ts' },
      { from: 'e.ts', to: 'd.ts' },
      { from: 'f.ts', to: 'f.ts' },
      { from: 'g.ts', to: 'a.ts' },
    ];
    expect(importCycles(planted)).toEqual(['a.ts → b.ts → c.ts → a.ts', 'd.ts → e.ts → d.ts', 'f.ts → f.ts']);
    expect(
      importCycles(planted.filter((e) => e.from !== 'c.ts' && e.from !== 'e.ts' && e.from !== 'f.ts')),
    ).toEqual([]);
  });

  test('a planted circle of type-only imports between two files on disk is found by the same scan', () => {
    const dir = mkdtempSync(join(tmpdir(), 'architecture-'));
    try {
      mkdirSync(join(dir, 'functions', 'core', 'x'), { recursive: true });
      writeFileSync(
        join(dir, 'functions/core/x/a.ts'),
        "import type { B } from './b.js';\nexport interface A { b?: B }\n",
      );
      writeFileSync(
        join(dir, 'functions/core/x/b.ts'),
        "export type { A } from './a.js';\nimport type { A } from './a.js';\nexport interface B { a?: A }\n",
      );
      const files = sourceFiles('functions', dir);
      const found = files.flatMap((from) => importsOf(from, dir).map((to) => ({ from, to })));
      expect(importCycles(found)).toEqual([
        'functions/core/x/a.ts → functions/core/x/b.ts → functions/core/x/a.ts',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('each domain of core/ is reached through its front', () => {
  test('handlers, steps, event handlers, watchers, lib/ and the other domains import only its index.ts', () => {
    expect(frontBreaches(edges).map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  test('every folder of core/ is a domain with a front, and no file lies loose in core/ but a types.ts', () => {
    const core = readdirSync(join(ROOT, 'functions/core'), { withFileTypes: true });
    const loose = core.filter((e) => e.isFile() && e.name !== 'types.ts').map((e) => e.name);
    expect(loose).toEqual([]);
    const frontless = core
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .filter((d) => !product.includes(`functions/core/${d}/index.ts`));
    expect(frontless).toEqual([]);
    expect(core.filter((e) => e.isDirectory()).length).toBeGreaterThan(5);
  });

  test('a planted breach is found: a step importing a domain file past the front, a domain another one', () => {
    const planted: Edge[] = [
      { from: 'functions/steps/run-execute.ts', to: 'functions/core/runs/execution/executor.ts' },
      { from: 'functions/api/runs/get.ts', to: 'functions/core/runs/index.ts' },
      { from: 'lib/local/recovery.ts', to: 'functions/core/runs/recovery.ts' },
      { from: 'functions/core/runs/lifecycle.ts', to: 'functions/core/environments/lifecycle.ts' },
      { from: 'functions/core/runs/lifecycle.ts', to: 'functions/core/environments/types.ts' },
      { from: 'functions/core/runs/lifecycle.ts', to: 'functions/core/runs/store.ts' },
      { from: 'functions/events/run-sweep.ts', to: 'functions/core/environments/types.ts' },
    ];
    expect(frontBreaches(planted).map((e) => `${e.from} → ${e.to}`)).toEqual([
      'functions/steps/run-execute.ts → functions/core/runs/execution/executor.ts',
      'lib/local/recovery.ts → functions/core/runs/recovery.ts',
      'functions/core/runs/lifecycle.ts → functions/core/environments/lifecycle.ts',
      'functions/events/run-sweep.ts → functions/core/environments/types.ts',
    ]);
  });
});

describe('folders a reader takes in at once', () => {
  const functionsFiles = sourceFiles('functions');

  test(`no folder of functions/ holds more than ${MAX_FILES_PER_FOLDER} source files directly`, () => {
    expect(crowdedFolders(functionsFiles)).toEqual([]);
  });

  test('a planted 16th file is found; tests and contract suites beside them do not count', () => {
    const files = Array.from({ length: MAX_FILES_PER_FOLDER }, (_, i) => `functions/core/x/f${i}.ts`);
    const tests = files.map((f) => f.replace(/\.ts$/, '.test.ts'));
    expect(crowdedFolders([...files, ...tests, 'functions/core/x/y.contract.ts'])).toEqual([]);
    expect(crowdedFolders([...files, 'functions/core/x/one-more.ts'])).toEqual([
      `functions/core/x: ${MAX_FILES_PER_FOLDER + 1} source files`,
    ]);
  });

  test("functions/README.md's map names every folder of functions/, and each one it names exists", () => {
    const readme = readFileSync(join(ROOT, 'functions/README.md'), 'utf8');
    const folders = [...new Set(functionsFiles.map((f) => dirname(f)))]
      .flatMap((d) => d.split('/').map((_, i, parts) => parts.slice(0, i + 1).join('/')))
      .filter((d, i, all) => d !== 'functions' && all.indexOf(d) === i)
      .map((d) => `${d.slice('functions/'.length)}/`);
    expect(folders.length).toBeGreaterThan(20);
    expect(folders.filter((d) => !readme.includes(d))).toEqual([]);
    const named = [
      ...readme.matchAll(
        /(?<![\w./<-])((?:api|steps|events|watchers|core|ports|shared|manifest)\/[\w./-]*)/g,
      ),
    ].map((m) => m[1]!.replace(/[.]$/, ''));
    expect(named.length).toBeGreaterThan(20);
    const missing = [...new Set(named)].filter((p) => {
      try {
        statSync(join(ROOT, 'functions', p));
        return false;
      } catch {
        return true;
      }
    });
    expect(missing).toEqual([]);
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
