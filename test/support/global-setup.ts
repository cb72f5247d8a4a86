import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * Jest global setup (unit, integration and cloud projects): one line on what this machine lacks and what
 * the suite skips for it (host-tools.ts); then, on linux x64, inflate @sparticuz/chromium's browser
 * (about 200 MB of brotli archives unpacked into the OS temp dir) once, before any test runs, so the
 * first test to launch it (the LambdaChromium contract test, a local run without Debian's chromium) never
 * spends its own timeout unpacking it on a busy machine, and parallel workers never race to write the same
 * files. Already unpacked: returns at once. Only on linux x64, the one platform that browser is built for
 * (the tests that use it are skipped elsewhere).
 */
export default async function globalSetup(): Promise<void> {
  const line = hostToolsLine();
  if (line) process.stderr.write(`\n${line}\n`);
  if (process.platform !== 'linux' || process.arch !== 'x64') return;
  const started = Date.now();
  const { default: chromium } = await import('@sparticuz/chromium');
  const path = await chromium.executablePath();
  const ms = Date.now() - started;
  if (ms > 1_000)
    process.stderr.write(`\nglobal setup: @sparticuz/chromium unpacked to ${path} in ${ms} ms\n`);
}

// Jest compiles a global setup without the projects' module mapping (`./x.js` → `./x.ts`), so what it
// uses sits here and imports only node: modules; the tests' own checks (bubblewrapUsable, chooseBrowser)
// decide what they skip.

const onPath = (name: string) =>
  (process.env.PATH ?? '').split(delimiter).some((dir) => {
    if (!dir) return false;
    try {
      accessSync(join(dir, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });

const runnable = (path: string) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/**
 * One line on what this machine lacks and what the suite does without it, or undefined when it has
 * everything: bubblewrap and pasta (outside CI the isolation, limits and per-environment network tests
 * are skipped without them; `.ci/run` installs them), and Debian's chromium and ffmpeg (test runs then use
 * the packaged ones `npm ci` installs, and nothing is skipped).
 */
export function hostToolsLine(): string | undefined {
  const lacking: string[] = [];
  if (!onPath('bwrap')) lacking.push('bubblewrap');
  if (!onPath('pasta')) lacking.push('pasta');
  else if (process.getuid?.() !== 0) lacking.push('root (for pasta)');
  const packaged = [
    runnable('/usr/bin/chromium') ? undefined : 'Chromium',
    onPath('ffmpeg') ? undefined : 'ffmpeg',
  ].filter(Boolean);
  const parts: string[] = [];
  if (lacking.length > 0)
    parts.push(
      process.env.CI
        ? `no ${lacking.join(', ')}: CI runs the tests that need them anyway (.ci/run installs them)`
        : `no ${lacking.join(', ')}: the sandbox and network isolation tests that need them are skipped (.ci/run installs them)`,
    );
  if (packaged.length > 0)
    parts.push(`test runs use the packaged ${packaged.join(' and ')} (no Debian ${packaged.join('/')})`);
  return parts.length > 0 ? `this machine: ${parts.join('; ')}` : undefined;
}
