import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { anchors, links, markedBlocks, slug } from '../support/markdown.js';

/*
 * Links of the user docs work from a fresh clone: every relative link of README.md, docs/*.md and
 * docs/reference/*.md names a
 * file of this repository (not one git ignores, and not one outside the clone), and every #anchor names a
 * heading (GitHub's slug) or an HTML id of its target.
 */

const ROOT = resolve(new URL('../..', import.meta.url).pathname);
const DOCS = [
  'README.md',
  ...['docs', 'docs/reference'].flatMap((dir) =>
    readdirSync(join(ROOT, dir))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `${dir}/${f}`),
  ),
];

/** Paths (relative to ROOT) that git ignores, so a clone would not have them. */
function ignored(paths: string[]): Set<string> {
  if (paths.length === 0) return new Set();
  try {
    const out = execFileSync('git', ['check-ignore', '--no-index', ...paths], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    return new Set(out.split('\n').filter(Boolean));
  } catch (err) {
    // Exit 1: none is ignored.
    if ((err as { status?: number }).status === 1) return new Set();
    throw err;
  }
}

/** Every broken relative link of `file` (relative to ROOT), as `file:line: target (why)`. */
function brokenLinks(file: string, text = readFileSync(join(ROOT, file), 'utf8')): string[] {
  const problems: string[] = [];
  const targets: { line: number; target: string; path: string; anchor?: string }[] = [];
  for (const { line, target } of links(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined];
    const path = pathPart === '' ? file : relative(ROOT, resolve(ROOT, dirname(file), decodeURI(pathPart)));
    if (path.startsWith('..')) {
      problems.push(`${file}:${line}: ${target} (outside the repository: a clone does not have it)`);
      continue;
    }
    targets.push({ line, target, path, anchor });
  }
  const gone = ignored([...new Set(targets.map((t) => t.path).filter((p) => p !== ''))]);
  for (const { line, target, path, anchor } of targets) {
    const abs = resolve(ROOT, path);
    if (!existsSync(abs)) {
      problems.push(`${file}:${line}: ${target} (no such file)`);
      continue;
    }
    if (gone.has(path)) {
      problems.push(`${file}:${line}: ${target} (ignored by git: a clone does not have it)`);
      continue;
    }
    if (anchor === undefined || anchor === '') continue;
    if (!path.endsWith('.md') || statSync(abs).isDirectory()) continue;
    const offered = anchors(path === file ? text : readFileSync(abs, 'utf8'));
    if (!offered.has(decodeURIComponent(anchor)))
      problems.push(`${file}:${line}: ${target} (no heading with anchor #${anchor} in ${path})`);
  }
  return problems;
}

describe('slug (GitHub heading anchors)', () => {
  test.each([
    ['What it is', 'what-it-is'],
    ['`preview.yaml`', 'previewyaml'],
    ['The CLI: `previewctl`', 'the-cli-previewctl'],
    ['3. Deploy a preview and wait until it is ready', '3-deploy-a-preview-and-wait-until-it-is-ready'],
    ['Run results, media and the report', 'run-results-media-and-the-report'],
    ['Test runs, inside', 'test-runs-inside'],
    ['Without access entries: the aws-auth ConfigMap', 'without-access-entries-the-aws-auth-configmap'],
  ])('%s → %s', (heading, expected) => {
    expect(slug(heading)).toBe(expected);
  });
  test('a repeated heading gets -1; headings inside code blocks are none', () => {
    const offered = anchors('# A\n\n## A\n\n```sh\n# not a heading\n```\n');
    expect([...offered]).toEqual(['a', 'a-1']);
  });
});

describe('links of the user docs', () => {
  test('README.md and docs/*.md are there', () => {
    expect(DOCS).toEqual(expect.arrayContaining(['README.md', 'docs/deploy-to-aws.md']));
    expect(links(readFileSync(join(ROOT, 'README.md'), 'utf8')).length).toBeGreaterThan(20);
  });

  test.each(DOCS)('%s: every relative link and anchor resolves in a clone', (file) => {
    expect(brokenLinks(file)).toEqual([]);
  });

  test('a missing file, a missing anchor, a link out of the repository and an ignored file are found', () => {
    // The checker itself can fail: the README with a bad link of each kind appended.
    const text = `${readFileSync(join(ROOT, 'README.md'), 'utf8')}
[a](docs/no-such-file.md) [b](#no-such-heading) [c](../outside.md) [d](docs/deploy-to-aws.md#nope)
[e](node_modules/jest/package.json) [f](#walk-through) [g](docs/deploy-to-aws.md#1-prerequisites)
`;
    const last = text.split('\n').length - 2;
    const before = new Set(brokenLinks('README.md'));
    expect(brokenLinks('README.md', text).filter((p) => !before.has(p))).toEqual([
      `README.md:${last}: ../outside.md (outside the repository: a clone does not have it)`,
      `README.md:${last}: docs/no-such-file.md (no such file)`,
      `README.md:${last}: #no-such-heading (no heading with anchor #no-such-heading in README.md)`,
      `README.md:${last}: docs/deploy-to-aws.md#nope (no heading with anchor #nope in docs/deploy-to-aws.md)`,
      `README.md:${last + 1}: node_modules/jest/package.json (ignored by git: a clone does not have it)`,
    ]);
  });

  test("the README's newcomer-test markers each mark a shell block", () => {
    // markedBlocks throws on a marker without its block; the names are unique so failures name one step.
    const blocks = markedBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(blocks.length).toBeGreaterThan(0);
    expect(new Set(blocks.map((b) => b.name)).size).toBe(blocks.length);
  });
});
