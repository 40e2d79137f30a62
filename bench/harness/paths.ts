// Where things are, from the compiled file's location: dist/bench/harness/*.js
// sits three levels below the repository root.
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const DIST = join(REPO_ROOT, 'dist');
export const RESULTS_DIR = join(REPO_ROOT, 'bench', 'results');
export const PEERS_DIR = join(REPO_ROOT, 'bench', 'peers');

/** The pinned Node the harness itself runs on (npm scripts and npx resolve node_modules/.bin/node). */
export const NODE = process.execPath;
