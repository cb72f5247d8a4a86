import type { Browser } from 'playwright-core';
import { LocalChromium } from '../../functions/ports/browser/local-chromium.js';
import { chooseBrowser } from '../../functions/ports/browser/local-tools.js';

/**
 * Whether test runs have a browser here: Debian's chromium, else the packaged @sparticuz/chromium that
 * `npm ci` installs on linux x64 (tests that need one are skipped only when neither is there).
 */
export const haveChromium = () => chooseBrowser() !== undefined;

/**
 * The local runtime's browser (Debian's chromium, else the packaged one, with the flags local runs
 * launch it with) driven by playwright-core, for a test that looks at a page as a visitor would (the
 * dashboard, a run report, the trace viewer, a WebSocket through a front door): headless, and leaving the
 * test process's signals alone. The caller closes it.
 */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  const spec = await new LocalChromium().launchSpec();
  return chromium.launch({
    executablePath: spec.executablePath,
    args: spec.args,
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
}
