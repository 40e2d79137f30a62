// kill_grace_ms: 0 (SIGKILL at once on a cancel) must not cut what a command
// wrote before it exited normally: its exit can be seen before the last read
// of its stdout, and a grace that ended on the next timer dropped the rest
// (a 200 with part of the answer, or none of it). Real processes, run as the
// agent runs them, several at once so that exits and reads interleave.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { CliRun, type CliRunHandler } from '../../src/agent/cli-run.js';
import { CliSessions } from '../../src/agent/cli-sessions.js';
import type { CliProviderConfig } from '../../src/agent/cli-config.js';
import { TunnelRequestSchema } from '../../src/gen/edge/v1/tunnel_pb.js';

const BYTES = 200_000;

/** One run's answer: the completion's content length, or the error it failed with. */
function run(provider: { config: CliProviderConfig; sessions: CliSessions }, id: number): Promise<number | string> {
  return new Promise((resolve) => {
    const body: Buffer[] = [];
    const handler: CliRunHandler = {
      onRequestStart() {},
      onResponseStart() {},
      onResponseData(_controller, chunk) {
        body.push(chunk);
      },
      onResponseEnd() {
        resolve((JSON.parse(Buffer.concat(body).toString('utf8')) as { choices: { message: { content: string } }[] }).choices[0].message.content.length);
      },
      onResponseError(_controller, err) {
        resolve(err.message);
      },
    };
    const request = create(TunnelRequestSchema, {
      runId: `run-${id}`,
      target: 'served',
      sessionId: `s-${id}`,
      body: Buffer.from(JSON.stringify({ model: 'served', messages: [{ role: 'user', content: 'hi' }] })),
    });
    new CliRun(provider, request, handler).start();
  });
}

test('kill_grace_ms 0: a command that exits after writing its answer is read to the end', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'cli-drain-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const config: CliProviderConfig = {
    // A small program that exits at once after its last write (a node script's own exit takes long enough to hide it).
    command: ['/bin/sh', '-c', `head -c ${BYTES} /dev/zero | tr '\\0' a`],
    args: [],
    resumeArgs: undefined,
    input: 'stdin',
    prompt: 'last_user',
    cwdRoot: root,
    env: [{ name: 'PATH', value: undefined }],
    timeoutMs: 30_000,
    maxOutputBytes: 16 * 1024 * 1024,
    killGraceMs: 0,
    sessionWaitMs: 60_000,
    sessionTtlMs: 0,
  };
  const provider = { config, sessions: new CliSessions(root) };
  for (let round = 0; round < 8; round++) {
    const lengths = await Promise.all(Array.from({ length: 8 }, (_, i) => run(provider, round * 8 + i)));
    assert.deepEqual(lengths, Array(8).fill(BYTES), `round ${round}`);
  }
});
