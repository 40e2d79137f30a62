// Retiring the streams of one node connection: lanes close once idle, the
// anchor last, and a busy lane is never cut before its tunnels are done or
// the grace ends (closing a lane takes it out of the live list it came in).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { retireLanes } from '../../../src/workers/grpc/retire.js';
import type { NodeSession } from '../../../src/workers/grpc/node-session.js';

class FakeStream {
  isActive = true;
  closedBecause: string | undefined;
  constructor(
    private readonly list: FakeStream[],
    readonly joinGeneration: number,
    public openTunnels: number,
  ) {
    list.push(this);
  }
  close(reason: string): void {
    if (!this.isActive) return;
    this.isActive = false;
    this.closedBecause = reason;
    this.list.splice(this.list.indexOf(this), 1); // as NodeLanes.remove does
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

test('idle lanes close at once; a busy lane and the anchor wait for its tunnels', async () => {
  const live: FakeStream[] = [];
  const anchor = new FakeStream(live, 0, 0);
  const idle = new FakeStream(live, 5, 0);
  const busy = new FakeStream(live, 5, 3);
  retireLanes(live as unknown as NodeSession[], 5_000, 'node removed');
  await sleep(120);
  assert.equal(idle.isActive, false, 'the idle lane closed');
  assert.equal(busy.isActive, true, 'the busy lane waits for its tunnels');
  assert.equal(anchor.isActive, true, 'the anchor waits for every lane here');
  busy.openTunnels = 0;
  await sleep(120);
  assert.equal(busy.isActive, false);
  assert.equal(anchor.isActive, false, 'the anchor closes last');
});

test('at the grace everything closes, busy or not', async () => {
  const live: FakeStream[] = [];
  const anchor = new FakeStream(live, 0, 2);
  const busy = new FakeStream(live, 5, 3);
  retireLanes(live as unknown as NodeSession[], 100, 'token changed');
  await sleep(250);
  assert.equal(busy.isActive, false);
  assert.equal(anchor.isActive, false);
});

test('holdAnchor: an idle anchor whose lanes live elsewhere stays until the grace', async () => {
  const live: FakeStream[] = [];
  const anchor = new FakeStream(live, 0, 0);
  retireLanes(live as unknown as NodeSession[], 300, 'node removed', true);
  await sleep(150);
  assert.equal(anchor.isActive, true);
  await sleep(300);
  assert.equal(anchor.isActive, false);
});

test('a worker holding only lanes closes each when idle', async () => {
  const live: FakeStream[] = [];
  const a = new FakeStream(live, 5, 1);
  const b = new FakeStream(live, 5, 0);
  retireLanes(live as unknown as NodeSession[], 5_000, 'node removed');
  await sleep(120);
  assert.equal(b.isActive, false);
  assert.equal(a.isActive, true);
  a.openTunnels = 0;
  await sleep(120);
  assert.equal(a.isActive, false, 'closed once idle, not at the grace');
});
