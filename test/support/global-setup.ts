/**
 * Jest global setup (unit and cloud projects): inflate @sparticuz/chromium's browser
 * (about 200 MB of brotli archives unpacked into the OS temp dir) once, before any test runs, so the
 * LambdaChromium contract test's first launch never spends its own timeout unpacking it on a busy machine,
 * and parallel workers never race to write the same files. Already unpacked: returns at once. Only on
 * linux x64, the one platform that browser is built for (the tests that use it are skipped elsewhere).
 */
export default async function inflateLambdaChromium(): Promise<void> {
  if (process.platform !== 'linux' || process.arch !== 'x64') return;
  const started = Date.now();
  const { default: chromium } = await import('@sparticuz/chromium');
  const path = await chromium.executablePath();
  const ms = Date.now() - started;
  if (ms > 1_000)
    process.stderr.write(`\nglobal setup: @sparticuz/chromium unpacked to ${path} in ${ms} ms\n`);
}
