import { readFileSync } from 'node:fs';
import { describe, expect, test } from '@jest/globals';

/*
 * The Node the project names is one Node everywhere (docs/contributing.md, "Node versions"): package.json's
 * `engines`, the lockfile's copy of it, the README's requirement lines, and the Node that .ci/node.sh
 * fetches for CI; and the floor is no lower than what the locked dependencies declare, so `npm ci` on the
 * named Node prints no EBADENGINE warning (CI installs with --engine-strict, which fails on one).
 */
const root = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');
const lock = JSON.parse(read('package-lock.json')) as {
  packages: Record<string, { version?: string; engines?: { node?: string } }>;
};
const engines: string = JSON.parse(read('package.json')).engines.node;
const floor = /^>=(\d+)\.(\d+)$/.exec(engines);

/** [major, minor, patch] of a version such as 22.19 or 22.19.0 (a missing part is 0). */
const parts = (version: string) => {
  const [major = 0, minor = 0, patch = 0] = version.split('.').map(Number);
  return [major, minor, patch] as const;
};
/** Whether version `a` is `b` or later. */
const atLeast = (a: string, b: string) => {
  const [x, y] = [parts(a), parts(b)];
  if (x[0] !== y[0]) return x[0] > y[0];
  return x[1] !== y[1] ? x[1] > y[1] : x[2] >= y[2];
};

describe('the Node the project names', () => {
  test('engines.node is ">=22.Y", in package.json and in the lockfile alike', () => {
    expect(floor?.[1]).toBe('22');
    expect(lock.packages['']?.engines?.node).toBe(engines);
  });

  test('no locked dependency asks more of Node 22 than the floor', () => {
    const above: string[] = [];
    for (const [path, pkg] of Object.entries(lock.packages)) {
      // Lower bounds in the 22 line: ">=22.19.0", "^22.17.0", ">=22".
      for (const m of (pkg.engines?.node ?? '').matchAll(/(?:>=|\^|~)\s*v?(22(?:\.\d+){0,2})/g)) {
        if (!atLeast(engines.slice(2), m[1] ?? ''))
          above.push(`${path}@${pkg.version}: ${pkg.engines?.node}`);
      }
    }
    expect(above).toEqual([]);
    // The floor is some dependency's: undici 8 (of @kubernetes/client-node) declares >=22.19.0.
    const named = Object.values(lock.packages).some((p) =>
      (p.engines?.node ?? '').includes(`${engines.slice(2)}.0`),
    );
    expect(named).toBe(true);
  });

  test('CI fetches a Node 22 at or above the floor', () => {
    const pinned = /^ci_node_version=(\S+)$/m.exec(read('.ci/node.sh'))?.[1] ?? '';
    expect(pinned).toMatch(/^22\.\d+\.\d+$/);
    expect(atLeast(pinned, engines.slice(2))).toBe(true);
    expect(read('.ci/run')).toContain('. .ci/node.sh');
  });

  test('the README and the contributing guide name it', () => {
    const readme = read('README.md');
    expect(readme.split('\n').slice(0, 8).join('\n')).toContain(`Node.js 22 (≥ ${engines.slice(2)})`);
    expect(readme).toContain(`Node.js 22 (≥ ${engines.slice(2)}:`);
    expect(read('docs/contributing.md')).toContain(`\`${engines}\``);
  });
});
