#!/usr/bin/env node
// The installed `node-agent` command (package.json bin): checks the Node.js
// version before anything else loads, then runs the CLI (cli.ts), so an
// older Node gets one clear line instead of a failure deep in grpc-js,
// undici or the edge's shared modules.
import { nodeVersionProblem } from '../shared/node-check.js';

const problem = nodeVersionProblem('node-agent');
if (problem === undefined) {
  import('./cli.js').catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else {
  process.stderr.write(problem);
  process.exitCode = 1;
}
