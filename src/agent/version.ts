// The agent's version as sent in Register: the package.json version, found by
// walking up from this module (it runs from dist/src/agent/ after a build).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function readPackageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const version = (JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version;
      return typeof version === 'string' ? version : '0.0.0';
    }
    const parent = dirname(dir);
    if (parent === dir) return '0.0.0';
    dir = parent;
  }
}

export const AGENT_VERSION: string = readPackageVersion();
