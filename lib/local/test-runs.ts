import {
  chooseBrowser,
  chooseFfmpeg,
  describeBrowserChoice,
  describeFfmpegChoice,
  describeMissingTools,
  type ToolLookup,
} from '../../functions/ports/browser/local-tools.js';
import { config } from '../../functions/shared/config.js';

/**
 * One line for the operator at `npm start`: which browser and which encoder test runs use (Debian's
 * chromium and ffmpeg, else the packaged ones `npm ci` installed), or, when either is missing, what to
 * install. Runs started while something is missing end `failed` with the same message. Reads
 * PREVIEW_BROWSER_PATH and PREVIEW_FFMPEG_PATH (after the local server set up the configuration).
 */
export function describeTestRunTools(lookup: ToolLookup = fromConfig()): string {
  const missing = describeMissingTools(lookup);
  if (missing) return `test runs: WILL FAIL: ${missing}`;
  const browser = chooseBrowser(lookup)!;
  const ffmpeg = chooseFfmpeg(lookup)!;
  return `test runs: browser ${describeBrowserChoice(browser)}, video with ${describeFfmpegChoice(ffmpeg)}`;
}

function fromConfig(): ToolLookup {
  const c = config().runs;
  return { browserPath: c.browserPath, ffmpegPath: c.ffmpegPath };
}
