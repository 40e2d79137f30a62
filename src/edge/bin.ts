#!/usr/bin/env node
// The installed `edge` command (package.json bin): checks the Node.js version
// before anything else loads, then runs the CLI (cli.ts). cli.ts imports the
// whole edge statically, which an older Node cannot even link, so the check
// has to sit in front of it, in a module with no other imports.
import { startCli } from '../shared/node-check.js';

// SIGHUP (systemctl reload) is held from here on: the CLI's reload handler goes in only once the whole edge has loaded.
startCli('edge', () => import('./cli.js'), ['SIGHUP']);
