// Reading a file a config names, for the check-config commands of the edge
// and the agent: a failure becomes one problem naming the config key and the
// absolute path (a check run from another directory says where it looked).
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';

/** The file's bytes, or undefined with a problem pushed. */
export async function readNamedFile(problems: string[], path: string, file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (err) {
    problems.push(`${path}: cannot read ${resolve(file)}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    return undefined;
  }
}
