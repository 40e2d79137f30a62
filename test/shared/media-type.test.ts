import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isEventStreamType } from '../../src/shared/media-type.js';

test('an event stream is told by its media type in any case, with or without parameters; anything else is not one', () => {
  for (const value of ['text/event-stream', 'text/event-stream; charset=utf-8', 'Text/Event-Stream', 'TEXT/EVENT-STREAM;charset=UTF-8']) assert.equal(isEventStreamType(value), true, value);
  for (const value of ['application/json', 'text/plain', 'text/event', '', 'Application/JSON', ' text/event-stream']) assert.equal(isEventStreamType(value), false, value);
});
