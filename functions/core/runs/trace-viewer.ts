import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pages } from '../../manifest/routes.js';

/*
 * The Playwright trace viewer's files: the static app that ships inside playwright-core
 * (`lib/vite/traceViewer`), served by the service from its own origin at `/trace-viewer/`: locally by
 * lib/local/trace-viewer.ts, in AWS by the `traceViewer` page (functions/api/runs/trace-viewer.ts), whose
 * Lambda gets the folder copied beside its bundle (`files` of the page in functions/manifest/routes.ts).
 * It holds no data and needs no credentials: it opens the trace its `?trace=` names (a run's signed media
 * URL) in the browser, through its service worker.
 */

/** Where the service serves the viewer (locally and as the `traceViewer` page in AWS). */
export const TRACE_VIEWER_PATH = '/trace-viewer/';

/** The viewer's folder, relative to the repository root: what the page's Lambda gets beside its bundle. */
export const TRACE_VIEWER_FILES: string = pages.traceViewer.files[0];

/** Content types of the files the viewer ships. */
export const TRACE_VIEWER_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.ttf': 'font/ttf',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
  '.png': 'image/png',
  '.wasm': 'application/wasm',
};

let root: string | undefined;
/**
 * Where the viewer's files are: beside the bundle in a Lambda (`<bundle dir>/node_modules/playwright-core/
 * lib/vite/traceViewer`, copied there at synth), else the installed playwright-core's.
 */
export function traceViewerRoot(): string {
  if (root !== undefined) return root;
  const here = dirname(fileURLToPath(import.meta.url));
  const bundled = join(here, TRACE_VIEWER_FILES);
  root = existsSync(bundled)
    ? bundled
    : join(
        dirname(createRequire(import.meta.url).resolve('playwright-core/package.json')),
        'lib',
        'vite',
        'traceViewer',
      );
  return root;
}

/**
 * The file of the viewer a request path names (what follows `/trace-viewer/`, URL-encoded; empty is
 * `index.html`): its absolute path and size, or undefined for anything else (outside the folder, not a
 * file, not decodable).
 */
export function traceViewerFile(encoded: string): { file: string; size: number } | undefined {
  let rel: string;
  try {
    rel = decodeURIComponent(encoded) || 'index.html';
  } catch {
    return undefined;
  }
  const base = traceViewerRoot();
  const file = normalize(join(base, rel));
  if (!file.startsWith(base + sep)) return undefined;
  try {
    const st = statSync(file);
    return st.isFile() ? { file, size: st.size } : undefined;
  } catch {
    return undefined;
  }
}

/** The content type of a viewer file. */
export const traceViewerType = (file: string): string =>
  TRACE_VIEWER_TYPES[extname(file)] ?? 'application/octet-stream';

/** Whether a viewer file is text (served as UTF-8; the rest is binary). */
export const isTextType = (type: string): boolean =>
  type.startsWith('text/') ||
  type === 'image/svg+xml' ||
  type.startsWith('application/json') ||
  type === 'application/manifest+json';

/**
 * A stylesheet of the viewer with the fonts it loads from its own folder (`url(./x.ttf)`) inlined as
 * `data:` URLs. API Gateway returns a Lambda's binary answer as bytes only when the request's first
 * `Accept` type is one of the API's binary media types, which a browser's font request (`*\/*`) is not
 * unless every type is binary (request bodies included); inlined, the font needs no binary answer.
 */
export function inlineFonts(css: string, cssFile: string): string {
  return css.replace(/url\((['"]?)(\.\/)?([A-Za-z0-9_.-]+\.ttf)\1\)/g, (whole, _q, _dot, name: string) => {
    const font = join(dirname(cssFile), name);
    if (!existsSync(font)) return whole;
    return `url(data:font/ttf;base64,${readFileSync(font).toString('base64')})`;
  });
}
