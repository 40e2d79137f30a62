#!/usr/bin/env node
// The installed `node-agent` command (package.json bin): checks the Node.js
// version before anything else loads, then runs the CLI (cli.ts), so an
// older Node gets one clear line instead of a failure deep in grpc-js or
// the edge's shared modules.
import { startCli } from '../shared/node-check.js';

startCli('node-agent', () => import('./cli.js'));
