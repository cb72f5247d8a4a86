import { config } from '../../shared/config.js';
import { LambdaChromium } from '../browser/lambda-chromium.js';
import { adapter } from './adapters.js';

/** The browser test runs drive (AWS: @sparticuz/chromium in the run executor Lambda, ffmpeg from a layer). */
export const browser = /* @__PURE__ */ adapter('browser', () => new LambdaChromium(config().runs.ffmpegPath));
