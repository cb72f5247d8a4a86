import {
  DEFAULT_CHROMIUM_PATH,
  describeMissingBrowser,
  findExecutable,
} from '../../functions/ports/browser/local-chromium.js';
import { config } from '../../functions/shared/config.js';

/**
 * One line for the operator at `npm start`: what test runs use (chromium and ffmpeg), or, when either is
 * missing, what to install. Runs started while something is missing end `failed` with the same message.
 * Reads PREVIEW_BROWSER_PATH and PREVIEW_FFMPEG_PATH (after the local server set up the configuration).
 */
export function describeTestRunTools(): string {
  const c = config().runs;
  const browserPath = c.browserPath ?? DEFAULT_CHROMIUM_PATH;
  const ffmpegPath = c.ffmpegPath ?? 'ffmpeg';
  const missing = describeMissingBrowser(browserPath, ffmpegPath);
  if (missing) return `test runs: WILL FAIL: ${missing}`;
  return `test runs: chromium ${findExecutable(browserPath)}, video with ffmpeg ${findExecutable(ffmpegPath)}`;
}
