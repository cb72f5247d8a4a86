import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { stagePath } from '../../api/stage.js';
import {
  inlineFonts,
  isTextType,
  traceViewerFile,
  traceViewerRoot,
  traceViewerType,
} from './trace-viewer.js';

describe('traceViewerFile', () => {
  test('finds the viewer files in the installed playwright-core; empty is index.html', () => {
    expect(traceViewerRoot()).toMatch(/playwright-core\/lib\/vite\/traceViewer$/);
    expect(traceViewerFile('')?.file).toBe(join(traceViewerRoot(), 'index.html'));
    expect(traceViewerFile('sw.bundle.js')?.size).toBeGreaterThan(1000);
  });
  test.each([
    ['a path out of the folder', '../../package.json'],
    ['an encoded one', '..%2F..%2Fpackage.json'],
    ['the folder itself', '.'],
    ['a sub-folder', 'assets'],
    ['a bad escape', '%E0%A4%A'],
    ['a missing file', 'nope.html'],
  ])('%s is not a file of it', (_what, path) => {
    expect(traceViewerFile(path)).toBeUndefined();
  });
});

describe('types', () => {
  test.each([
    ['index.html', 'text/html; charset=utf-8', true],
    ['a.js', 'text/javascript; charset=utf-8', true],
    ['a.css', 'text/css; charset=utf-8', true],
    ['logo.svg', 'image/svg+xml', true],
    ['manifest.webmanifest', 'application/manifest+json', true],
    ['codicon.ttf', 'font/ttf', false],
    ['x.bin', 'application/octet-stream', false],
  ])('%s is %s (text: %s)', (file, type, text) => {
    expect(traceViewerType(file)).toBe(type);
    expect(isTextType(type)).toBe(text);
  });
});

describe('inlineFonts', () => {
  const dir = mkdtempSync(join(tmpdir(), 'inline-fonts-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'icons.ttf'), Buffer.from([0, 1, 2, 255]));
  const css = join(dir, 'a.css');
  test('a font of its own folder becomes a data: URL, quoted or not, with or without ./', () => {
    for (const ref of ['url(./icons.ttf)', 'url(icons.ttf)', 'url("./icons.ttf")', "url('icons.ttf')"])
      expect(inlineFonts(`@font-face{src:${ref}}`, css)).toBe(
        '@font-face{src:url(data:font/ttf;base64,AAEC/w==)}',
      );
  });
  test('anything else is left as it is', () => {
    const other = '@font-face{src:url(./missing.ttf)} a{background:url(./x.png)} b{src:url(../up.ttf)}';
    expect(inlineFonts(other, css)).toBe(other);
  });
});

describe('stagePath', () => {
  test.each([
    ['abc.execute-api.eu-west-1.amazonaws.com', 'api', '/api'],
    ['abc.execute-api.eu-west-1.amazonaws.com', undefined, ''],
    ['previews.example.com', 'api', ''],
    ['127.0.0.1:3000', 'api', ''],
  ])('%s with stage %s: %p', (host, stage, want) => {
    expect(stagePath({ requestContext: { stage } as never }, host)).toBe(want);
  });
});
