// `node-agent check-config FILE`: beyond the config's own checks (which
// loading it makes), what the agent would otherwise find only later: the
// edge TLS files (read at the first dial, after "node agent starting"), and
// each cli provider's program and cwd_root (found at its first request, as a
// run that fails with cli_failed). Paths are shown absolute: a check run from
// another directory says where it looked.
import { constants } from 'node:fs';
import { access, realpath, stat } from 'node:fs/promises';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { checkCaFile, checkKeyPair } from '../shared/config-files.js';
import { childEnv } from './cli-config.js';
import { sessionRootProblem } from './cli-sessions.js';
import type { AgentConfig } from './config.js';

/** libuv's search path when the child's environment has no PATH. */
const DEFAULT_PATH = '/usr/bin:/bin';

async function executable(file: string): Promise<boolean> {
  try {
    // X_OK holds for a directory too (search permission), which execve refuses (EACCES).
    if (!(await stat(file)).isFile()) return false;
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Why the sessions' root cannot be had, or undefined: it is created when
 * missing (mkdir -p, at the first run), so the nearest path on it that
 * exists must be a directory, and one it can be created in.
 */
async function cwdRootProblem(root: string): Promise<string | undefined> {
  for (let path = root; ; path = dirname(path)) {
    let isDirectory: boolean;
    try {
      isDirectory = (await stat(path)).isDirectory();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code === 'ENOENT' || code === 'ENOTDIR') && dirname(path) !== path) continue;
      return `cannot read ${path}: ${code ?? (err as Error).message}`;
    }
    if (!isDirectory) return `${path} is not a directory, so no session directory can be made under ${root}`;
    try {
      await access(path, constants.W_OK | constants.X_OK);
    } catch {
      // Each session's directory is made in the root, and the root (when missing) in its nearest directory.
      return path === root ? `${root} is not writable by this user, so no session directory can be made in it` : `${root} does not exist and cannot be created: ${path} is not writable by this user`;
    }
    // What the first run checks next (cli-sessions.ts): no other user may reach the sessions.
    const real = await realpath(path);
    return path === root ? sessionRootProblem(real) : sessionRootProblem(root, real);
  }
}

/** Every problem with the files and programs `config` names; empty when each is there and usable. */
export async function checkAgentFiles(config: AgentConfig): Promise<string[]> {
  const problems: string[] = [];
  const tls = config.edge.tls;
  if (tls !== undefined) {
    await checkCaFile(problems, 'edge.tls.ca_file', tls.caFile);
    if (tls.certFile !== undefined && tls.keyFile !== undefined) await checkKeyPair(problems, 'edge.tls', tls.certFile, tls.keyFile);
  }
  for (const [i, provider] of config.providers.entries()) {
    const program = provider.cli?.command[0];
    if (program === undefined) continue;
    const rootProblem = await cwdRootProblem(provider.cli?.cwdRoot ?? '');
    if (rootProblem !== undefined) problems.push(`providers[${i}].cwd_root: ${rootProblem}`);
    const path = `providers[${i}].command[0]`;
    if (program.includes('/')) {
      // spawn() runs it from the session's directory: a relative path would be looked up there.
      if (!isAbsolute(program)) problems.push(`${path}: ${program} is relative, so each run would look for it in its session's directory; give an absolute path`);
      else if (!(await executable(program))) problems.push(`${path}: ${program} is not an executable file`);
      continue;
    }
    // A bare name is searched on the child's PATH (providers[].env), not the agent's own.
    const childPath = childEnv(provider.cli?.env ?? []).PATH;
    const searchPath = childPath ?? DEFAULT_PATH;
    let found = false;
    for (const dir of searchPath.split(delimiter)) {
      if (dir !== '' && (await executable(join(dir, program)))) {
        found = true;
        break;
      }
    }
    if (!found) problems.push(`${path}: no executable ${program} on the command's PATH (${searchPath}${childPath === undefined ? ': the default, since providers[].env passes no PATH' : ''})`);
  }
  return problems;
}
