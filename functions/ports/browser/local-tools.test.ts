import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { LocalChromium, packagedChromiumFlags } from './local-chromium.js';
import {
  chooseBrowser,
  chooseFfmpeg,
  describeBrowserChoice,
  describeFfmpegChoice,
  describeMissingTools,
  packagedChromiumDir,
  packagedFfmpegPath,
} from './local-tools.js';

/*
 * Which browser and ffmpeg a local run takes: configured, else the system's, else the packaged ones.
 * The system's are pointed at files of this test (or at nothing) so the test means the same on a machine
 * with or without the apt packages; the packaged ones are this checkout's node_modules (linux x64).
 */

const dir = mkdtempSync(join(tmpdir(), 'local-tools-'));
const exe = (name: string) => {
  const p = join(dir, name);
  writeFileSync(p, '#!/bin/sh\n');
  chmodSync(p, 0o755);
  return p;
};
const fakeChromium = exe('chromium');
const fakeFfmpeg = exe('ffmpeg');
const notExecutable = join(dir, 'plain');
writeFileSync(notExecutable, '');
const none = { systemChromium: join(dir, 'absent-chromium'), systemFfmpeg: join(dir, 'absent-ffmpeg') };
const linuxX64 = process.platform === 'linux' && process.arch === 'x64';

describe('the browser', () => {
  test("Debian's chromium when it is there", () => {
    expect(chooseBrowser({ systemChromium: fakeChromium })).toEqual({ origin: 'system', path: fakeChromium });
  });

  test('a configured path is the only one considered: missing stays missing', () => {
    expect(chooseBrowser({ browserPath: fakeChromium, systemChromium: join(dir, 'x') })).toEqual({
      origin: 'configured',
      path: fakeChromium,
    });
    expect(chooseBrowser({ browserPath: join(dir, 'absent'), systemChromium: fakeChromium })).toBeUndefined();
    expect(chooseBrowser({ browserPath: notExecutable })).toBeUndefined();
  });

  test('without packaged builds and no system chromium: none', () => {
    expect(chooseBrowser({ ...none, packaged: false })).toBeUndefined();
  });

  (linuxX64 ? test : test.skip)('no system chromium: the packaged @sparticuz/chromium', () => {
    expect(packagedChromiumDir()).toMatch(/@sparticuz\/chromium\/bin$/);
    expect(chooseBrowser(none)).toEqual({ origin: 'packaged' });
    expect(describeBrowserChoice({ origin: 'packaged' })).toBe(
      'packaged Chromium (@sparticuz/chromium, unpacked on first run)',
    );
  });

  (linuxX64 ? test : test.skip)(
    'the packaged Chromium launches with its own flags, minus the loosening ones, plus the offline ones',
    async () => {
      const spec = await new LocalChromium(none).launchSpec();
      expect(spec.executablePath).not.toBe('/usr/bin/chromium');
      expect(spec.args).toEqual(
        expect.arrayContaining(["--headless='shell'", '--disable-background-networking']),
      );
      for (const loose of ['--disable-web-security', '--single-process', '--disable-site-isolation-trials'])
        expect(spec.args).not.toContain(loose);
      expect(spec.ffmpegPath).toBe(packagedFfmpegPath());
    },
    120_000,
  );

  test('packaged flags: the Lambda set without loosening, local offline flags added once', () => {
    expect(packagedChromiumFlags(['--no-sandbox', '--disable-web-security', "--headless='shell'"])).toEqual([
      '--no-sandbox',
      "--headless='shell'",
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ]);
  });
});

describe('ffmpeg', () => {
  test('the system ffmpeg first, by path or by name on PATH', () => {
    expect(chooseFfmpeg({ systemFfmpeg: fakeFfmpeg })).toEqual({ origin: 'system', path: fakeFfmpeg });
    const path = process.env.PATH;
    process.env.PATH = dir;
    try {
      expect(chooseFfmpeg()).toEqual({ origin: 'system', path: fakeFfmpeg });
    } finally {
      process.env.PATH = path;
    }
  });

  test('a configured path is the only one considered', () => {
    expect(chooseFfmpeg({ ffmpegPath: fakeFfmpeg })).toEqual({ origin: 'configured', path: fakeFfmpeg });
    expect(chooseFfmpeg({ ffmpegPath: 'no-such-ffmpeg', systemFfmpeg: fakeFfmpeg })).toBeUndefined();
  });

  (linuxX64 ? test : test.skip)('no system ffmpeg: the packaged @ffmpeg-installer/linux-x64', () => {
    const packaged = packagedFfmpegPath();
    expect(packaged).toMatch(/@ffmpeg-installer\/linux-x64\/ffmpeg$/);
    expect(chooseFfmpeg(none)).toEqual({ origin: 'packaged', path: packaged });
    expect(describeFfmpegChoice({ origin: 'packaged', path: packaged! })).toBe(
      `packaged ffmpeg ${packaged} (@ffmpeg-installer/linux-x64)`,
    );
  });
});

describe('what is missing', () => {
  test('nothing when both are there', () => {
    expect(describeMissingTools({ systemChromium: fakeChromium, systemFfmpeg: fakeFfmpeg })).toBeUndefined();
  });

  (linuxX64 ? test : test.skip)('neither found: the apt packages and the npm packages that would do', () => {
    expect(describeMissingTools({ ...none, packaged: false })).toBe(
      `test runs need chromium (${none.systemChromium}) and ffmpeg (${none.systemFfmpeg}), which are not ` +
        'installed: install with `apt-get install -y chromium ffmpeg` (Debian/Ubuntu), or `npm ci` on linux ' +
        'x64 for the packaged @sparticuz/chromium and @ffmpeg-installer/linux-x64, or point ' +
        'PREVIEW_BROWSER_PATH / PREVIEW_FFMPEG_PATH at them',
    );
  });

  test('configured paths that are not there are named as given', () => {
    expect(describeMissingTools({ browserPath: '/nope/chromium', ffmpegPath: fakeFfmpeg })).toBe(
      'test runs need chromium (/nope/chromium), which is not installed: install with `apt-get install -y ' +
        'chromium` (Debian/Ubuntu), or point PREVIEW_BROWSER_PATH / PREVIEW_FFMPEG_PATH at them',
    );
  });
});
