import { describe, expect, test } from '@jest/globals';
import {
  decide,
  labelMatters,
  MAX_PATH_GLOBS,
  matchesPaths,
  type PreviewRules,
  parsePreviewRuleSettings,
  previewRulesOf,
} from './preview-rules.js';

/* Which pull requests get a preview: the rules' pure parts. */

const rules = (over: Partial<PreviewRules> = {}): PreviewRules => ({ ...previewRulesOf({}), ...over });
const facts = (labels: string[] = [], author = 'octocat', files?: string[]) => {
  let asked = 0;
  return {
    pr: {
      labels,
      author,
      changedFiles: async () => {
        asked++;
        return files;
      },
    },
    asked: () => asked,
  };
};

describe('settings', () => {
  test('defaults: opt-out label no-preview, nothing required, no paths, no authors', () => {
    expect(previewRulesOf({})).toEqual({
      skipLabel: 'no-preview',
      requireLabel: null,
      paths: [],
      skipAuthors: [],
    });
    expect(previewRulesOf({ skipLabel: '', requireLabel: '' })).toMatchObject({
      skipLabel: null,
      requireLabel: null,
    });
  });

  test('normalized: labels trimmed, globs deduplicated and sorted (web/ means web/**), authors by login', () => {
    expect(
      parsePreviewRuleSettings({
        skipLabel: ' skip me ',
        requireLabel: 'preview',
        paths: ['web/', 'api/**', ' ', 'api/**', '*.md'],
        skipAuthors: ['dependabot[bot]', 'Renovate[bot]', 'DEPENDABOT[bot]'],
      }),
    ).toEqual({
      skipLabel: 'skip me',
      requireLabel: 'preview',
      paths: ['*.md', 'api/**', 'web/**'],
      skipAuthors: ['DEPENDABOT[bot]', 'Renovate[bot]'],
    });
    // Only what is given; "" and [] turn a rule off.
    expect(parsePreviewRuleSettings({ paths: [''] })).toEqual({ paths: [] });
    expect(parsePreviewRuleSettings({ skipLabel: '' })).toEqual({ skipLabel: '' });
  });

  test.each([
    [{ paths: ['/web/**'] }, 'paths: "/web/**" must be relative to the repository root'],
    [{ paths: ['../x'] }, 'paths: "../x" must not hold . or .. segments'],
    [{ paths: ['!docs/**'] }, 'is a negation, which is not supported'],
    [{ paths: ['a\u0000b'] }, 'holds a control character'],
    [{ paths: ['x'.repeat(201)] }, 'is longer than 200 characters'],
    [
      { paths: Array.from({ length: MAX_PATH_GLOBS + 1 }, (_, i) => `d${i}/**`) },
      'paths: at most 50 (51 given)',
    ],
    [{ skipAuthors: ['not a login'] }, 'skipAuthors: "not a login" is not a GitHub login'],
    [{ skipAuthors: ['-dash'] }, 'is not a GitHub login'],
    [{ skipLabel: 'x'.repeat(51) }, 'skipLabel: a label name of at most 50 characters'],
    [{ requireLabel: 'a\nb' }, 'requireLabel: a label name'],
  ])('refused: %j', (given, message) => {
    expect(() => parsePreviewRuleSettings(given)).toThrow(message);
  });
});

describe('decide', () => {
  test('by default every pull request gets a preview but one labelled no-preview (any case)', async () => {
    expect(await decide(rules(), facts().pr)).toEqual({ preview: true });
    expect(await decide(rules(), facts(['bug', 'No-Preview']).pr)).toEqual({
      preview: false,
      reason: 'the pull request has the label "no-preview"',
    });
    // The opt-out turned off: the label means nothing.
    expect(await decide(rules({ skipLabel: null }), facts(['no-preview']).pr)).toEqual({ preview: true });
  });

  test('a required label: only pull requests carrying it', async () => {
    const r = rules({ requireLabel: 'preview' });
    expect(await decide(r, facts(['bug']).pr)).toEqual({
      preview: false,
      reason: 'the pull request lacks the label "preview"',
    });
    expect(await decide(r, facts(['preview']).pr)).toEqual({ preview: true });
    // The opt-out wins over the opt-in.
    expect((await decide(r, facts(['preview', 'no-preview']).pr)).preview).toBe(false);
  });

  test('skipped authors, whatever the case of the login', async () => {
    const r = rules({ skipAuthors: ['dependabot[bot]'] });
    expect(await decide(r, facts([], 'Dependabot[bot]').pr)).toEqual({
      preview: false,
      reason: 'pull request by Dependabot[bot], an author this application skips',
    });
    expect(await decide(r, facts([], 'octocat').pr)).toEqual({ preview: true });
  });

  test('paths: a changed file must match a glob; the files are asked only then, and once', async () => {
    const r = rules({ paths: ['web/**', '*.md'] });
    const docs = facts([], 'octocat', ['api/main.go', 'docs/guide.txt']);
    expect(await decide(r, docs.pr)).toEqual({
      preview: false,
      reason: 'the pull request changes no file matching web/**, *.md',
    });
    expect(docs.asked()).toBe(1);
    expect(await decide(r, facts([], 'octocat', ['api/main.go', 'web/src/a.ts']).pr)).toEqual({
      preview: true,
    });
    expect(await decide(r, facts([], 'octocat', ['README.md']).pr)).toEqual({ preview: true });
    // The source host cannot say: no skip.
    expect(await decide(r, facts([], 'octocat', undefined).pr)).toEqual({ preview: true });
    // A label skip decides before any file is asked for.
    const labelled = facts(['no-preview'], 'octocat', ['web/a']);
    expect((await decide(r, labelled.pr)).preview).toBe(false);
    expect(labelled.asked()).toBe(0);
    // No paths rule: never asked.
    const plain = facts([], 'octocat', []);
    await decide(rules(), plain.pr);
    expect(plain.asked()).toBe(0);
  });

  test('glob semantics: ** crosses folders, * does not, braces', () => {
    expect(matchesPaths(['web/**'], 'web/src/deep/a.ts')).toBe(true);
    expect(matchesPaths(['web/**'], 'webapp/a.ts')).toBe(false);
    expect(matchesPaths(['*.md'], 'README.md')).toBe(true);
    expect(matchesPaths(['*.md'], 'docs/a.md')).toBe(false);
    expect(matchesPaths(['**/*.md'], 'docs/a.md')).toBe(true);
    expect(matchesPaths(['{api,web}/**'], 'api/x')).toBe(true);
    expect(matchesPaths(['{api,web}/**'], 'docs/x')).toBe(false);
  });

  test('glob semantics: ? and classes stay in one name, dot-files only when the glob spells the dot', () => {
    expect(matchesPaths(['a?c'], 'abc')).toBe(true);
    expect(matchesPaths(['a?c'], 'a/c')).toBe(false);
    expect(matchesPaths(['[ab].txt'], 'b.txt')).toBe(true);
    expect(matchesPaths(['[!a].txt'], 'b.txt')).toBe(true);
    expect(matchesPaths(['[!a].txt'], 'a.txt')).toBe(false);
    expect(matchesPaths(['src/**/*.ts'], 'src/a.ts')).toBe(true);
    expect(matchesPaths(['src/**/*.ts'], 'src/b/c.ts')).toBe(true);
    expect(matchesPaths(['web/**'], 'web/.env')).toBe(false);
    expect(matchesPaths(['**'], '.github/workflows/ci.yml')).toBe(false);
    expect(matchesPaths(['.github/**'], '.github/workflows/ci.yml')).toBe(true);
    expect(matchesPaths(['docs/*.md'], 'docs/A.MD')).toBe(false);
    // Wider than path.matchesGlob was: the folder's own path (a submodule's change is listed so).
    expect(matchesPaths(['web/**'], 'web')).toBe(true);
    expect(matchesPaths([], 'web/a')).toBe(false);
  });

  test('a label matters only when it is the opt-out or the required one', () => {
    expect(labelMatters(rules(), 'NO-PREVIEW')).toBe(true);
    expect(labelMatters(rules(), 'bug')).toBe(false);
    expect(labelMatters(rules({ requireLabel: 'preview' }), 'preview')).toBe(true);
    expect(labelMatters(rules({ skipLabel: null }), 'no-preview')).toBe(false);
  });
});
