import picomatch from 'picomatch/posix.js';
import { ValidationError } from '../../shared/errors.js';

/*
 * Which pull requests get a preview, per application (preview rules): a label that opts out (`skipLabel`,
 * default `no-preview`), a label that must be present (`requireLabel`, optional), path globs a pull
 * request must touch (`paths`, optional) and authors skipped (`skipAuthors`, default none). The webhook
 * and the Pull Request Updated consumer decide with `decide`; settings are read with `previewRulesOf`
 * and changed through `parsePreviewRuleSettings` (`previewctl apps update`, PATCH of an application).
 */

/** The label that opts a pull request out when the application names none. */
export const DEFAULT_SKIP_LABEL = 'no-preview';
/** At most this many path globs and skipped authors per application. */
export const MAX_PATH_GLOBS = 50;
export const MAX_SKIP_AUTHORS = 50;
/** GitHub's longest label name. */
const MAX_LABEL = 50;
const MAX_GLOB = 200;
// A GitHub login, or an App's bot account (`dependabot[bot]`).
const LOGIN_RE = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

/** The rule settings of an application, as stored (absent: the default). */
export interface PreviewRuleSettings {
  /** A label that opts a pull request out; `''` turns the opt-out off. @default 'no-preview' */
  skipLabel?: string;
  /** A label a pull request must carry to get a preview; `''` or absent: none required. */
  requireLabel?: string;
  /** Globs (`web/**`, `*.md`); a pull request gets a preview only if it changes a file one matches. @default none */
  paths?: string[];
  /** Logins whose pull requests get no preview (`dependabot[bot]`), compared case-insensitively. @default none */
  skipAuthors?: string[];
}

/** The rules as they apply (defaults filled in): what the application view shows. */
export interface PreviewRules {
  skipLabel: string | null;
  requireLabel: string | null;
  paths: string[];
  skipAuthors: string[];
}

export function previewRulesOf(app: PreviewRuleSettings): PreviewRules {
  return {
    skipLabel: app.skipLabel === undefined ? DEFAULT_SKIP_LABEL : app.skipLabel || null,
    requireLabel: app.requireLabel || null,
    paths: app.paths ?? [],
    skipAuthors: app.skipAuthors ?? [],
  };
}

function parseLabel(field: string, text: string): string {
  const label = text.trim();
  if (label.length > MAX_LABEL || CONTROL_RE.test(label))
    throw new ValidationError(`${field}: a label name of at most ${MAX_LABEL} characters ("" for none)`);
  return label;
}

/** A path glob as given, normalized (`web/` means `web/**`); a ValidationError says what is wrong. */
function parseGlob(text: string): string {
  let glob = text.trim();
  const bad = (why: string) => new ValidationError(`paths: "${glob.slice(0, 60)}" ${why}`);
  if (glob.length > MAX_GLOB) throw bad(`is longer than ${MAX_GLOB} characters`);
  if (CONTROL_RE.test(glob)) throw bad('holds a control character');
  if (glob.startsWith('!')) throw bad('is a negation, which is not supported: list the paths that count');
  if (glob.startsWith('/')) throw bad('must be relative to the repository root (no leading /)');
  if (glob.split('/').some((s) => s === '..' || s === '.')) throw bad('must not hold . or .. segments');
  if (glob.endsWith('/')) glob = `${glob}**`;
  return glob;
}

function parseList<T>(field: string, list: string[], max: number, one: (text: string) => T): T[] {
  const items = list.map((s) => s.trim()).filter(Boolean);
  if (items.length > max) throw new ValidationError(`${field}: at most ${max} (${items.length} given)`);
  return items.map(one);
}

/**
 * The rule settings given (`apps update`), validated and normalized: labels trimmed (`""` turns a rule
 * off), globs checked (relative, no `.`/`..`, no negation; `web/` means `web/**`), authors GitHub logins;
 * lists deduplicated and sorted (`[]` empties one). Only the fields given are returned. A ValidationError
 * names the field.
 */
export function parsePreviewRuleSettings(s: PreviewRuleSettings): PreviewRuleSettings {
  const out: PreviewRuleSettings = {};
  if (s.skipLabel !== undefined) out.skipLabel = parseLabel('skipLabel', s.skipLabel);
  if (s.requireLabel !== undefined) out.requireLabel = parseLabel('requireLabel', s.requireLabel);
  if (s.paths !== undefined)
    out.paths = [...new Set(parseList('paths', s.paths, MAX_PATH_GLOBS, parseGlob))].sort();
  if (s.skipAuthors !== undefined) {
    const byLower = new Map<string, string>();
    for (const login of parseList('skipAuthors', s.skipAuthors, MAX_SKIP_AUTHORS, (l) => l)) {
      if (!LOGIN_RE.test(login))
        throw new ValidationError(`skipAuthors: "${login.slice(0, 60)}" is not a GitHub login`);
      byLower.set(login.toLowerCase(), login);
    }
    out.skipAuthors = [...byLower.values()].sort();
  }
  return out;
}

/** What a pull request shows the rules. */
export interface PullRequestFacts {
  /** Its labels' names now. */
  labels: string[];
  /** Its author's login (absent: unknown, the author rule does not apply). */
  author?: string;
  /**
   * The paths it changes (asked only when the application has `paths`); undefined when the source host
   * cannot say (the paths rule then does not skip it).
   */
  changedFiles: () => Promise<string[] | undefined>;
}

export type Verdict = { preview: true } | { preview: false; reason: string };

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/**
 * A test of repository-relative paths against the rules' globs, compiled once (picomatch, the POSIX build:
 * `/` separates folders on every platform). `**` crosses folders, `*` and `?` do not, `{a,b}` and
 * `[abc]`/`[!a]` classes; a name starting with `.` is matched only by a glob that spells the dot
 * (`.github/**`). These are the semantics `path.matchesGlob` had here, which Node 20 ships as
 * experimental (it printed an ExperimentalWarning on first use); two differences, both only wider: `web/**`
 * also matches the path `web` itself (a submodule), and `\` escapes the next character.
 */
export function pathMatcher(globs: string[]): (file: string) => boolean {
  if (globs.length === 0) return () => false;
  return picomatch(globs, { posix: true });
}

/** Whether `file` (repository-relative) matches a glob of the rules. */
export function matchesPaths(globs: string[], file: string): boolean {
  return pathMatcher(globs)(file);
}

/**
 * Whether a pull request gets a preview under an application's rules, and if not why (the reason the
 * webhook answers and the PR comment shows). Checked in this order, the changed files last since only
 * they cost a call: the author, the opt-out label, the required label, the paths. A label matches
 * whatever its case (GitHub's label names are case-insensitive).
 */
export async function decide(rules: PreviewRules, pr: PullRequestFacts): Promise<Verdict> {
  if (pr.author && rules.skipAuthors.some((a) => same(a, pr.author!)))
    return { preview: false, reason: `pull request by ${pr.author}, an author this application skips` };
  if (rules.skipLabel && pr.labels.some((l) => same(l, rules.skipLabel!)))
    return { preview: false, reason: `the pull request has the label "${rules.skipLabel}"` };
  if (rules.requireLabel && !pr.labels.some((l) => same(l, rules.requireLabel!)))
    return { preview: false, reason: `the pull request lacks the label "${rules.requireLabel}"` };
  if (rules.paths.length) {
    const files = await pr.changedFiles();
    const matches = pathMatcher(rules.paths);
    if (files && !files.some(matches)) {
      const shown = rules.paths.slice(0, 5).join(', ') + (rules.paths.length > 5 ? ', …' : '');
      return { preview: false, reason: `the pull request changes no file matching ${shown}` };
    }
  }
  return { preview: true };
}

/** Whether adding or removing `label` can change the verdict: it is the opt-out or the required label. */
export function labelMatters(rules: PreviewRules, label: string): boolean {
  return [rules.skipLabel, rules.requireLabel].some((l) => l !== null && same(l, label));
}
