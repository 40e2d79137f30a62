// `edge check-config`: beyond the config's own checks, the files it names.
// A certificate that does not match its key, a CA file with no certificate
// in it, or an empty artifact directory would otherwise pass here and fail
// only at start (or, for a CA, at the first node's handshake). Relative
// paths are read from the working directory, as the edge reads them: each
// problem shows the absolute path, so a check run from another directory
// says where it looked.
import { resolve } from 'node:path';
import { loadTarball } from '../main/bootstrap/artifacts.js';
import { readTlsMaterial } from '../shared/tls-material.js';
import type { EdgeConfig } from '../shared/config-types.js';

/** Every problem with the files `config` names; empty when each is there and usable. */
export async function checkConfigFiles(config: EdgeConfig): Promise<string[]> {
  const problems: string[] = [];
  // The same reading and checks as at start and on a refresh.
  await readTlsMaterial(config.tls, problems);
  if (config.bootstrap !== undefined) {
    try {
      await loadTarball(resolve(config.bootstrap.artifactDir));
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  return problems;
}
