import { resolveTarget } from './api.js';
import { checkArgs, runApiCommand } from './api-commands.js';
import { helpFor, type Parsed, parseCommandLine, UsageError } from './args.js';

/*
 * previewctl's entry: help, parsing, then an API command here or an admin command (organizations,
 * applications, tests import, events put: they act on the tables) through `admin`, which loads the
 * service's code (admin-commands.ts). bin/previewctl.mjs runs this file bundled (no TypeScript compiled
 * per call): `--help` and the API commands load nothing else.
 */

export interface MainDeps {
  /**
   * Run an admin command, parsed here (admin-commands.ts's `main`, which loads the service's code);
   * returns its exit code.
   */
  admin: (command: Parsed) => Promise<number>;
  /** @default process.stdout / process.stderr writes */
  out?: (text: string) => void;
  err?: (text: string) => void;
  env?: NodeJS.ProcessEnv;
  pollMs?: number;
}

/** Run previewctl with `args` (after the program name); resolves with the exit code. */
export async function main(args: string[], deps: MainDeps): Promise<number> {
  const out = deps.out ?? ((t: string) => process.stdout.write(t));
  const err = deps.err ?? ((t: string) => process.stderr.write(t));
  const help = helpFor(args);
  if (help !== undefined) {
    out(`${help}\n`);
    return 0;
  }
  const json = args.includes('--json');
  try {
    const parsed = parseCommandLine(args);
    if (parsed.command.via === 'admin') return await deps.admin({ ...parsed, json });
    checkArgs(parsed);
    const target = resolveTarget(parsed.org, deps.env ?? process.env);
    const outcome = await runApiCommand(parsed, {
      target,
      progress: (line) => err(`${line}\n`),
      pollMs: deps.pollMs,
    });
    if (json) out(`${JSON.stringify(outcome.result)}\n`);
    else if (outcome.code === 0 || outcome.text) out(`${outcome.text}\n`);
    return outcome.code;
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    if (json) out(`${JSON.stringify({ error: message })}\n`);
    else err(`previewctl: ${message}\n`);
    return e instanceof UsageError ? 2 : 1;
  }
}
