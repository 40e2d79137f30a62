// The mock provider every target ends at. One process for the whole run, so
// each target is measured against the very same upstream. Request bodies are
// not kept (--body-log-limit 0): 1 MB bodies would otherwise pile up.
import { join } from 'node:path';
import { answers } from '../harness/http-probe.js';
import { DIST, NODE } from '../harness/paths.js';
import { freePort } from '../harness/ports.js';
import type { Supervisor } from '../harness/processes.js';
import type { MockUpstream } from '../harness/types.js';

export async function startMock(supervisor: Supervisor): Promise<MockUpstream> {
  const port = await freePort();
  const child = supervisor.spawn('mock', NODE, [join(DIST, 'src/mock/cli.js'), '--port', String(port), '--log-limit', '1', '--body-log-limit', '0']);
  const origin = `http://127.0.0.1:${port}`;
  await supervisor.waitReady(child, () => answers(`${origin}/mock/stats`));
  return { origin, port, process: { role: 'mock', pid: child.pid, tree: false } };
}
