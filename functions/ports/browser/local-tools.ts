import { accessSync, constants, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, dirname, isAbsolute, join } from 'node:path';

/*
 * Which chromium and ffmpeg a local test run uses. In this order, for each tool:
 * - the configured one (PREVIEW_BROWSER_PATH, PREVIEW_FFMPEG_PATH): exactly that, or missing;
 * - the system's: Debian's chromium package (/usr/bin/chromium), ffmpeg on PATH;
 * - the packaged one `npm ci` installs on linux x64: `@sparticuz/chromium` (the Chromium the Lambda runs,
 *   unpacked into the OS temp dir on first use) and the optional `@ffmpeg-installer/linux-x64` (the static
 *   ffmpeg of the stack's ffmpeg layer).
 * So `npm ci && npm start` runs tests on a machine without the apt packages.
 */

/** Debian's `chromium` package. */
export const DEFAULT_CHROMIUM_PATH = '/usr/bin/chromium';

/** The npm packages whose builds stand in for the apt packages. */
export const PACKAGED_CHROMIUM = '@sparticuz/chromium';
export const PACKAGED_FFMPEG = '@ffmpeg-installer/linux-x64';

/** An executable by path, or looked up on PATH by name; undefined when there is none. */
export function findExecutable(nameOrPath: string): string | undefined {
  const runnable = (p: string) => {
    try {
      accessSync(p, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (isAbsolute(nameOrPath) || nameOrPath.includes('/'))
    return existsSync(nameOrPath) && runnable(nameOrPath) ? nameOrPath : undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, nameOrPath);
    if (runnable(candidate)) return candidate;
  }
  return undefined;
}

/** Whether the packaged builds are for this machine (both are linux x86_64 binaries). */
const packagedPlatform = () => process.platform === 'linux' && process.arch === 'x64';

/** The packaged Chromium's archive directory, when npm installed it and it runs here. */
export function packagedChromiumDir(): string | undefined {
  if (!packagedPlatform()) return undefined;
  try {
    // The package exports only its entry (build/index.js); its archives sit in ../bin.
    const bin = join(dirname(createRequire(import.meta.url).resolve(PACKAGED_CHROMIUM)), '..', 'bin');
    return existsSync(join(bin, 'chromium.br')) ? bin : undefined;
  } catch {
    return undefined;
  }
}

/** The packaged ffmpeg binary, when npm installed it (an optional dependency: linux x64 only). */
export function packagedFfmpegPath(): string | undefined {
  if (!packagedPlatform()) return undefined;
  try {
    const manifest = createRequire(import.meta.url).resolve(`${PACKAGED_FFMPEG}/package.json`);
    return findExecutable(join(dirname(manifest), 'ffmpeg'));
  } catch {
    return undefined;
  }
}

/** Where a tool comes from. */
export type ToolOrigin = 'configured' | 'system' | 'packaged';

/** The browser a local run launches: a path, or the packaged Chromium (its path is known once unpacked). */
export type BrowserChoice = { origin: 'configured' | 'system'; path: string } | { origin: 'packaged' };

export interface FfmpegChoice {
  origin: ToolOrigin;
  path: string;
}

/** Where to look; the defaults are this machine's (tests point them elsewhere). */
export interface ToolLookup {
  /** PREVIEW_BROWSER_PATH: when set, the only browser considered. */
  browserPath?: string;
  /** PREVIEW_FFMPEG_PATH: when set, the only ffmpeg considered. */
  ffmpegPath?: string;
  /** Debian's chromium. @default DEFAULT_CHROMIUM_PATH */
  systemChromium?: string;
  /** ffmpeg's name on PATH, or a path. @default 'ffmpeg' */
  systemFfmpeg?: string;
  /** Whether the packaged builds count (false: as if npm had not installed them). @default true */
  packaged?: boolean;
}

/** The browser a local run uses, or undefined when there is none. */
export function chooseBrowser(lookup: ToolLookup = {}): BrowserChoice | undefined {
  if (lookup.browserPath !== undefined) {
    const path = findExecutable(lookup.browserPath);
    return path ? { origin: 'configured', path } : undefined;
  }
  const system = findExecutable(lookup.systemChromium ?? DEFAULT_CHROMIUM_PATH);
  if (system) return { origin: 'system', path: system };
  if (lookup.packaged !== false && packagedChromiumDir()) return { origin: 'packaged' };
  return undefined;
}

/** The ffmpeg a local run encodes its video with, or undefined when there is none. */
export function chooseFfmpeg(lookup: ToolLookup = {}): FfmpegChoice | undefined {
  if (lookup.ffmpegPath !== undefined) {
    const path = findExecutable(lookup.ffmpegPath);
    return path ? { origin: 'configured', path } : undefined;
  }
  const system = findExecutable(lookup.systemFfmpeg ?? 'ffmpeg');
  if (system) return { origin: 'system', path: system };
  const packaged = lookup.packaged !== false ? packagedFfmpegPath() : undefined;
  return packaged ? { origin: 'packaged', path: packaged } : undefined;
}

/**
 * What a host lacks to run test runs locally, as the line `npm start` prints and failed runs carry;
 * undefined when there is a browser and an ffmpeg. A configured path is named as given; otherwise the
 * message names both the apt package and the npm package that would do.
 */
export function describeMissingTools(lookup: ToolLookup = {}): string | undefined {
  const missing: string[] = [];
  const packages: string[] = [];
  const npmPackages: string[] = [];
  if (!chooseBrowser(lookup)) {
    missing.push(`chromium (${lookup.browserPath ?? lookup.systemChromium ?? DEFAULT_CHROMIUM_PATH})`);
    packages.push('chromium');
    if (lookup.browserPath === undefined) npmPackages.push(PACKAGED_CHROMIUM);
  }
  if (!chooseFfmpeg(lookup)) {
    missing.push(`ffmpeg (${lookup.ffmpegPath ?? lookup.systemFfmpeg ?? 'ffmpeg'})`);
    packages.push('ffmpeg');
    if (lookup.ffmpegPath === undefined) npmPackages.push(PACKAGED_FFMPEG);
  }
  if (missing.length === 0) return undefined;
  // On linux x64 `npm ci` installs the packaged builds (missing here: an install without them).
  const orPackaged =
    npmPackages.length > 0 && packagedPlatform()
      ? `, or \`npm ci\` on linux x64 for the packaged ${npmPackages.join(' and ')}`
      : '';
  return (
    `test runs need ${missing.join(' and ')}, which ${missing.length > 1 ? 'are' : 'is'} not installed: ` +
    `install with \`apt-get install -y ${packages.join(' ')}\` (Debian/Ubuntu)${orPackaged}, or point ` +
    'PREVIEW_BROWSER_PATH / PREVIEW_FFMPEG_PATH at them'
  );
}

/** How `npm start` names a choice: where it comes from and its path. */
export function describeBrowserChoice(choice: BrowserChoice): string {
  if (choice.origin === 'packaged') return `packaged Chromium (${PACKAGED_CHROMIUM}, unpacked on first run)`;
  return choice.origin === 'system'
    ? `Debian's chromium ${choice.path}`
    : `chromium ${choice.path} (PREVIEW_BROWSER_PATH)`;
}

export function describeFfmpegChoice(choice: FfmpegChoice): string {
  if (choice.origin === 'packaged') return `packaged ffmpeg ${choice.path} (${PACKAGED_FFMPEG})`;
  return choice.origin === 'system' ? `ffmpeg ${choice.path}` : `ffmpeg ${choice.path} (PREVIEW_FFMPEG_PATH)`;
}
