import { existsSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { DEFAULT_CHROMIUM_PATH, LOCAL_CHROMIUM_FLAGS } from '../../functions/ports/browser/local-chromium.js';

/** Whether Debian's chromium is installed (tests that need it are skipped otherwise). */
export const haveChromium = () => existsSync(DEFAULT_CHROMIUM_PATH);

/**
 * Debian's chromium driven by playwright-core with the local browser's flags, for tests that look at a
 * page themselves (the dashboard, a WebSocket through a front door); jest's signals left to jest.
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
