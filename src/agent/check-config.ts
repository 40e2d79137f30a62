// `node-agent check-config FILE`: beyond the config's own checks (which
// loading it makes), what the agent would otherwise find only later: the
// edge TLS files (read at the first dial, after "node agent starting"), and
// each cli provider's program (found at its first request, as a run that
// fails with cli_failed). Paths are shown absolute: a check run from
// another directory says where it looked.
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';
import { checkCaFile, checkKeyPair } from '../shared/config-files.js';
import { childEnv } from './cli-config.js';
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
