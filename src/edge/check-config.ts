// `edge check-config`: beyond the config's own checks, the files it names.
// A certificate that does not match its key, a CA file with no certificate
// in it, or an empty artifact directory would otherwise pass here and fail
// only at start (or, for a CA, at the first node's handshake). Relative
// paths are read from the working directory, as the edge reads them: each
// problem shows the absolute path, so a check run from another directory
// says where it looked.
import { resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import { loadTarball } from '../main/bootstrap/artifacts.js';
import { readNamedFile } from '../shared/config-files.js';
import type { EdgeConfig, TlsFilesConfig } from '../shared/config-types.js';

async function checkPair(problems: string[], path: string, files: TlsFilesConfig): Promise<void> {
  const cert = await readNamedFile(problems, `${path}.cert_file`, files.certFile);
  const key = await readNamedFile(problems, `${path}.key_file`, files.keyFile);
  if (cert === undefined || key === undefined) return;
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    problems.push(`${path}: ${resolve(files.certFile)} and ${resolve(files.keyFile)} are not a certificate and its key: ${(err as Error).message}`);
  }
}

/** Every problem with the files `config` names; empty when each is there and usable. */
export async function checkConfigFiles(config: EdgeConfig): Promise<string[]> {
  const problems: string[] = [];
  const tls = config.tls;
  if (tls?.client !== undefined) await checkPair(problems, 'tls.client', tls.client);
  if (tls?.nodes !== undefined) {
    await checkPair(problems, 'tls.nodes', tls.nodes);
    const caFile = tls.nodes.clientCaFile;
    if (caFile !== undefined) {
      // createSecureContext takes a CA file with no certificate in it without a word: look for one.
      const ca = await readNamedFile(problems, 'tls.nodes.client_ca_file', caFile);
      if (ca !== undefined && !ca.includes('-----BEGIN CERTIFICATE-----')) problems.push(`tls.nodes.client_ca_file: ${resolve(caFile)} holds no PEM certificate`);
      else if (ca !== undefined) {
        try {
          createSecureContext({ ca });
        } catch (err) {
          problems.push(`tls.nodes.client_ca_file: ${resolve(caFile)}: ${(err as Error).message}`);
        }
      }
    }
  }
  if (config.bootstrap !== undefined) {
    try {
      await loadTarball(resolve(config.bootstrap.artifactDir));
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  return problems;
}
