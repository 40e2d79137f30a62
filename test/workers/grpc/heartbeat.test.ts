// The edge's heartbeat judgement on a real NodeSession over a recording
// call: silence is counted from Registered (the node starts its heartbeats
// when it reads it), not from its Register.
import { LogThrottle } from '../../../src/shared/log-throttle.js';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { afterEach, test } from 'node:test';
import { heartbeatMessage, registerMessage } from '../../../src/agent/frames.js';
import { silentLogger } from '../../../src/shared/logger.js';
import { ProtocolStats } from '../../../src/workers/grpc/frame-guard.js';
import { NodeSession, type NodeCall, type SessionHost } from '../../../src/workers/grpc/node-session.js';
import { waitUntil } from '../../helpers/stack.js';

const INTERVAL_MS = 40;
// Far above the beat interval: a loaded machine's late timers must not read as silence.
const TIMEOUT_MS = 600;

class RecordingCall extends EventEmitter {
  ended = false;
  getPeer(): string {
    return 'test:0';
  }
  write(): boolean {
    return true;
  }
  end(): void {
    this.ended = true;
  }
}

const open: NodeSession[] = [];
const timers: NodeJS.Timeout[] = [];
afterEach(() => {
  for (const t of timers.splice(0)) clearInterval(t);
  for (const s of open.splice(0)) s.close('test over');
});

/** A session whose Register main answers `answerMs` later (a ring round trip, a busy scheduler), and a node that heartbeats from Registered on. */
function session(answerMs: number): { call: RecordingCall; stats: ProtocolStats; beats: () => number } {
  const call = new RecordingCall();
  const stats = new ProtocolStats();
  let beats = 0;
  const beat = (): void => {
    beats++;
    call.emit('data', heartbeatMessage(Date.now()));
  };
  const host: SessionHost = {
    heartbeatIntervalMs: INTERVAL_MS,
    heartbeatTimeoutMs: TIMEOUT_MS,
    registerTimeoutMs: 10_000,
    maxFrameBytes: 1 << 20,
    protocolStats: stats,
    credentialRejections: new LogThrottle(10_000),
    registerTimeoutLog: new LogThrottle(10_000),
    logger: silentLogger(),
    register(s: NodeSession): string | undefined {
      setTimeout(() => {
        s.activate(1);
        timers.push(setInterval(beat, INTERVAL_MS));
      }, answerMs);
      return undefined;
    },
    unregister(): void {},
    forget(): void {},
  };
  open.push(new NodeSession(call as unknown as NodeCall, host));
  call.emit('data', registerMessage('n', 't', 'v', ['p'], 0, 0, new Map(), []));
  return { call, stats, beats: () => beats };
}

test('a Register answered late is not a heartbeat timeout: silence counts from Registered', async () => {
  const { call, stats, beats } = session(TIMEOUT_MS + 200);
  // Registered came after the timeout counted from Register; a few beats since show the session judged on.
  await waitUntil(() => beats() >= 4 || call.ended, 'four heartbeats after Registered');
  assert.equal(stats.heartbeatTimeouts, 0);
  assert.equal(call.ended, false, 'the session stays open');
});

