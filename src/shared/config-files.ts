// Reading the files a config names, for the check-config commands of the
// edge and the agent: a failure becomes one problem naming the config key and
// the absolute path (a check run from another directory says where it looked).
import { readFile } from 'node:fs/promises';
import { caOk, keyPairOk, unreadable } from './tls-material.js';

/** The file's bytes, or undefined with a problem pushed. */
export async function readNamedFile(problems: string[], path: string, file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (err) {
    problems.push(unreadable(path, file, err));
    return undefined;
  }
}

/** A certificate and its key (`${path}.cert_file`, `${path}.key_file`): both readable, and a pair. */
export async function checkKeyPair(problems: string[], path: string, certFile: string, keyFile: string): Promise<void> {
  const cert = await readNamedFile(problems, `${path}.cert_file`, certFile);
  const key = await readNamedFile(problems, `${path}.key_file`, keyFile);
  if (cert !== undefined && key !== undefined) keyPairOk(problems, path, { cert, key }, { certFile, keyFile });
}

/** A CA file (`path` is its key): readable and holding a usable PEM certificate. */
export async function checkCaFile(problems: string[], path: string, file: string): Promise<void> {
  const ca = await readNamedFile(problems, path, file);
  if (ca !== undefined) caOk(problems, path, ca, file);
}
