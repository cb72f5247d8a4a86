import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { newId } from '../../../shared/crypto.js';
import { DeployFailed } from '../../../shared/step-errors.js';
import type { AppLaunch, RuntimeTarget } from '../port.js';
import {
  type LimitHit,
  limitedLaunchScript,
  limitMessage,
  SANDBOX_CGROUP_PREFIX,
  SandboxCgroups,
} from './limits.js';
import { drainedOrLater, maskedOutput, openLog } from './logs.js';
import { bubblewrapArgs, liveGroupMembers, SANDBOX_HOME } from './sandbox.js';
import {
  type AppState,
  type EnvState,
  envId,
  type LocalRuntime,
  netnsPath,
  POLL_MS,
  sleep,
} from './state.js';

/*
 * Process supervision: an app's or a build's command started in a process group of its own (in its
 * sandbox when isolation is on), its output masked into its log, its exit and the limit it hit recorded;
 * an app stopped with a grace period, and what a killed server left running found and killed.
 */

/** The variables every app and build gets from the host; nothing else of the server's environment leaks. */
const INHERITED_VARS = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'TZ', 'NODE_EXTRA_CA_CERTS', 'SHELL'];
/** Marks a process as ours (and which app it is), so recovery never kills a stranger that reused a pid. */
export const OWNER_VAR = 'PREVIEW_RUNTIME_APP';
const STOP_GRACE_MS = 5_000;

/** Start an app's process from its build on `port` (its log gets a start header; see `spawnCommand`). */
export async function startApp(
  rt: LocalRuntime,
  target: RuntimeTarget,
  env: EnvState,
  launch: AppLaunch,
  port: number,
) {
  const app = env.apps[launch.name]!;
  const build = app.build!;
  const logFile = openLog(rt, target, launch.name, `start ${build.sha.slice(0, 12)} on port ${port}`);
  const secrets = [...launch.secretKeys.map((k) => launch.vars[k]!), ...(launch.masked ?? [])].filter(
    (v) => v.length > 0,
  );
  const { child, drained, lastOutputAt, cgroups } = spawnCommand(
    rt,
    launch.spec.command!,
    build.dir,
    logFile,
    { build: false },
    {
      ...launch.vars,
      PORT: String(port),
      [OWNER_VAR]: `${envId(target)}/${launch.name}`,
    },
    secrets,
    rt.network === 'namespace' ? netnsPath(rt, envId(target)) : undefined,
  );
  if (child.pid === undefined) {
    const how = rt.isolation === 'bwrap' ? 'bwrap' : '/bin/sh';
    throw new DeployFailed(`app ${launch.name}: could not start ${how}`);
  }
  const pid = child.pid;
  rt.exits.delete(pid); // a reused pid must not inherit an old process's exit
  rt.children.set(pid, child);
  // Its exit is known once its output is in the log (a failure quotes the log's end).
  rt.lastOutput.set(pid, lastOutputAt);
  void drained.then(() => rt.lastOutput.delete(pid));
  if (cgroups) {
    rt.cgroups.set(pid, cgroups);
    rt.diskWatch.add(pid, build.dir);
  }
  rt.hits.delete(pid);
  void exitOf(child).then(async (how) => {
    await drainedOrLater(drained);
    rt.diskWatch.delete(pid);
    rt.hits.set(pid, rt.overDisk.delete(pid) ? 'disk' : cgroups?.hit());
    rt.exits.set(pid, how);
    // What it left running is killed with the group when the app is stopped; until then its cgroups stay.
    rt.children.delete(pid);
  });
  rt.secretValues.set(`${envId(target)}/${launch.name}`, secrets);
  app.port = port;
  app.running = { pid, port, buildId: build.buildId, startedAt: new Date().toISOString() };
}

export async function stopApp(rt: LocalRuntime, app: AppState) {
  const running = app.running;
  if (!running) return;
  delete app.running;
  const child = rt.children.get(running.pid);
  if (!child) {
    killGroup(running.pid, 'SIGKILL');
    rt.cgroups.get(running.pid)?.remove();
    rt.cgroups.delete(running.pid);
    return;
  }
  const exited = exitOf(child);
  // Who gets the SIGTERM: the processes of the group now. Not bwrap's own ones: the sandbox's init
  // ignores a SIGTERM from outside and ends with the command, and the one outside ends at once.
  const signalled = new Set(
    liveGroupMembers(running.pid)
      .filter((m) => m.comm !== 'bwrap')
      .map((m) => m.pid),
  );
  killGroup(running.pid, 'SIGTERM');
  const timer = setTimeout(() => killGroup(running.pid, 'SIGKILL'), STOP_GRACE_MS);
  await exited;
  // The group's leader (the shell, or bwrap) may be gone while the app it started, which got the
  // SIGTERM too, is still shutting down: give those the grace period (Linux: seen in /proc; elsewhere
  // not waited for). A process that was not there yet when the SIGTERM went out (an app stopped as it
  // starts) never got it: it is not waited for, the SIGKILL below takes it.
  const deadline = Date.now() + STOP_GRACE_MS;
  const stillStopping = () => liveGroupMembers(running.pid).some((m) => signalled.has(m.pid));
  while (signalled.size > 0 && stillStopping() && Date.now() < deadline) await sleep(POLL_MS);
  clearTimeout(timer);
  // Make sure nothing it started outlives it.
  killGroup(running.pid, 'SIGKILL');
  rt.cgroups.get(running.pid)?.remove();
  rt.cgroups.delete(running.pid);
  rt.hits.delete(running.pid);
  rt.diskWatch.delete(running.pid);
}

/**
 * Start `command` with `/bin/sh -c` in `dir`, in its own process group, with the inherited variables
 * plus `vars`; inside a bubblewrap sandbox when isolation is on. Its output goes to `logFile` (which it
 * takes over and closes) through a pipe that masks `secrets` as it writes (shared/masking/mask-stream.ts):
 * the file never holds a value. `drained`: settles once all of its output is written and the file closed.
 */
export function spawnCommand(
  rt: LocalRuntime,
  command: string,
  dir: string,
  logFile: number,
  opts: { build: boolean },
  vars: Record<string, string>,
  secrets: string[],
  netns?: string,
): { child: ChildProcess; drained: Promise<void>; lastOutputAt: () => number; cgroups?: SandboxCgroups } {
  const stdio: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe'];
  let child: ChildProcess;
  let cgroups: SandboxCgroups | undefined;
  if (rt.isolation === 'bwrap') {
    // Variables go through bwrap's own environment (not --setenv), so the sandbox leader's
    // /proc/<pid>/environ carries the owner marker recovery looks for.
    const env = { ...inherited(), HOME: SANDBOX_HOME, TMPDIR: '/tmp', ...vars };
    const hidden = [...new Set(rt.hiddenPaths.map(([path]) => path))];
    const args = bubblewrapArgs(command, dir, { ...opts, hidden, tmpMiB: rt.limits.tmpMiB });
    // A shell joins the sandbox's cgroups and sets its file size limit, then becomes bwrap (exec: the
    // same process, so the same process group and pid).
    cgroups = new SandboxCgroups(`${SANDBOX_CGROUP_PREFIX}${newId()}`, rt.limits);
    const script = limitedLaunchScript(rt.limits);
    // In the environment's network namespace: nsenter joins it and becomes bwrap (the same process).
    const enter = netns ? ['nsenter', `--net=${netns}`, '--'] : [];
    const argv = ['-c', script, 'sh', ...cgroups.procsFiles(), '--', ...enter, 'bwrap', ...args];
    child = spawn('/bin/sh', argv, {
      cwd: dir,
      env,
      stdio,
      detached: true,
    });
  } else {
    child = spawn('/bin/sh', ['-c', command], {
      cwd: dir,
      env: { ...inherited(), ...vars },
      stdio,
      detached: true,
    });
  }
  const { drained, lastOutputAt } = maskedOutput(child, logFile, secrets);
  return { child, drained, lastOutputAt, cgroups };
}

/** What a sandbox that failed hit of its limits, as its failure names it (bwrap only: none otherwise). */
export function limitFailure(
  rt: LocalRuntime,
  who: string,
  hit: LimitHit | undefined,
  exit: string,
  output: string,
) {
  if (rt.isolation !== 'bwrap') return undefined;
  return limitMessage(who, rt.limits, hit, exit, output);
}

function inherited(): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const k of INHERITED_VARS) if (process.env[k] !== undefined) vars[k] = process.env[k]!;
  return vars;
}

/** Resolves with how a child ended: `exit code N` or `signal S`. */
export function exitOf(child: ChildProcess): Promise<string> {
  if (child.exitCode !== null) return Promise.resolve(`exit code ${child.exitCode}`);
  if (child.signalCode !== null) return Promise.resolve(`signal ${child.signalCode}`);
  return new Promise((resolve) => {
    child.once('error', (err) => resolve(`spawn error ${err.message}`));
    child.once('exit', (code, signal) => resolve(signal ? `signal ${signal}` : `exit code ${code}`));
  });
}

/**
 * Resolve once no live process is left in group `pgid` (Linux: seen in /proc; elsewhere at once), or
 * after `ms`. A SIGKILLed group's leader may be reaped while the processes it started, inside a sandbox's
 * pid namespace too, are still tearing down: who waits for a killed build waits for this as well.
 */
export async function groupGone(pgid: number | undefined, ms = STOP_GRACE_MS): Promise<void> {
  if (pgid === undefined) return;
  const deadline = Date.now() + ms;
  while (liveGroupMembers(pgid).length > 0 && Date.now() < deadline) await sleep(POLL_MS);
}

/** Signal a whole process group (the shell and what it started); false if it is gone. */
export function killGroup(pid: number | undefined, signal: NodeJS.Signals): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Kill a process group a crash left behind, if its leader is still ours (Linux: checked in /proc). */
export function killOrphan(pid: number, envPrefix: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const environ = `/proc/${pid}/environ`;
  if (existsSync(environ)) {
    try {
      const vars = readFileSync(environ, 'utf8').split('\0');
      if (!vars.some((v) => v.startsWith(`${OWNER_VAR}=${envPrefix}/`))) return false;
    } catch {
      return false;
    }
  }
  return killGroup(pid, 'SIGKILL');
}
