import { existsSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { DEFAULT_CHROMIUM_PATH, LOCAL_CHROMIUM_FLAGS } from '../../functions/ports/browser/local-chromium.js';

/** Whether Debian's chromium is installed (tests that need it are skipped otherwise). */
export const haveChromium = () => existsSync(DEFAULT_CHROMIUM_PATH);

/**
 * Debian's chromium driven by playwright-core, for a test that looks at a page as a visitor would (the
 * dashboard, a run report, the trace viewer, a WebSocket through a front door): headless, with the local
 * runtime's flags, and leaving the test process's signals alone. The caller closes it.
 */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: DEFAULT_CHROMIUM_PATH,
    args: [...LOCAL_CHROMIUM_FLAGS],
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
}
