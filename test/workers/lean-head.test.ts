// The lean head reader takes only the plain shape of an API POST; every
// other head must read as undefined, so that node:http's parser answers it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readLeanHead } from '../../src/workers/http/lean-head.js';

const ROUTES = ['/v1/chat/completions', '/v1/embeddings'];
const LIMIT = 16 * 1024;

function head(lines: readonly string[], body = ''): Buffer {
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`, 'latin1');
}

const PLAIN = ['POST /v1/chat/completions HTTP/1.1', 'Host: edge', 'Content-Type: application/json', 'Content-Length: 2'];

describe('readLeanHead', () => {
  test('reads a plain API POST: url, path, headers by lower-cased name, raw pairs, length, where the body starts', () => {
    const bytes = head(['POST /v1/chat/completions?x=1 HTTP/1.1', 'Host: edge', 'X-Request-Id:  abc \t', 'Content-Length: 2'], '{}');
    const got = readLeanHead(bytes, LIMIT, ROUTES);
    assert.ok(got !== undefined);
    assert.equal(got.url, '/v1/chat/completions?x=1');
    assert.equal(got.path, '/v1/chat/completions');
    assert.deepEqual(got.headers, { host: 'edge', 'x-request-id': 'abc', 'content-length': '2' });
    assert.deepEqual(got.rawHeaders, ['Host', 'edge', 'X-Request-Id', 'abc', 'Content-Length', '2']);
    assert.equal(got.contentLength, 2);
    assert.equal(got.close, false);
    assert.equal(bytes.subarray(got.headBytes).toString(), '{}');
  });

  test('no Content-Length is an empty body; Connection: close is noted', () => {
    const got = readLeanHead(head(['POST /v1/embeddings HTTP/1.1', 'Host: edge', 'Connection: Close']), LIMIT, ROUTES);
    assert.equal(got?.contentLength, 0);
    assert.equal(got?.close, true);
  });

  test('Connection: keep-alive, and keep-alive among other tokens, keep the connection; close among them ends it', () => {
    for (const [value, close] of [['keep-alive', false], ['Keep-Alive', false], ['keep-alive, te', false], ['te, close', true], ['keep-alive,close', true]] as const) {
      const got = readLeanHead(head([...PLAIN, `Connection: ${value}`], '{}'), LIMIT, ROUTES);
      assert.equal(got?.close, close, value);
    }
  });

  const refused: Record<string, Buffer> = {
    'an incomplete head': Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\n', 'latin1'),
    'a head over the header limit': head([...PLAIN, `X-Big: ${'a'.repeat(LIMIT)}`]),
    'another method': head(['GET /v1/chat/completions HTTP/1.1', 'Host: edge']),
    'another route': head(['POST /v1/models HTTP/1.1', 'Host: edge']),
    'HTTP/1.0': head(['POST /v1/chat/completions HTTP/1.0', 'Host: edge']),
    'an absolute-form target': head(['POST http://edge/v1/chat/completions HTTP/1.1', 'Host: edge']),
    'a target with a control character': head(['POST /v1/chat/completions\x01 HTTP/1.1', 'Host: edge']),
    'no Host': head(['POST /v1/chat/completions HTTP/1.1', 'Content-Length: 0']),
    'Transfer-Encoding': head([...PLAIN.slice(0, 3), 'Transfer-Encoding: chunked']),
    'Content-Length and Transfer-Encoding': head([...PLAIN, 'Transfer-Encoding: chunked']),
    'two Content-Lengths': head([...PLAIN, 'Content-Length: 2']),
    'a signed Content-Length': head([...PLAIN.slice(0, 3), 'Content-Length: +2']),
    'a Content-Length list': head([...PLAIN.slice(0, 3), 'Content-Length: 2, 2']),
    'Expect': head([...PLAIN, 'Expect: 100-continue']),
    'Upgrade': head([...PLAIN, 'Upgrade: websocket']),
    'Connection: upgrade': head([...PLAIN, 'Connection: keep-alive, Upgrade']),
    'a repeated header': head([...PLAIN, 'Accept: a', 'accept: b']),
    'a header named after Object.prototype': head([...PLAIN, '__proto__: x']),
    'a space before the colon': head([...PLAIN, 'X-A : b']),
    'an obs-fold': head([...PLAIN, 'X-A: b', ' folded']),
    'a bare LF': Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: edge\nX-A: b\r\n\r\n', 'latin1'),
    'a bare CR in a value': head([...PLAIN, 'X-A: b\rc']),
    'a NUL in a value': head([...PLAIN, 'X-A: b\x00c']),
    'a line without a colon': head([...PLAIN, 'nonsense']),
    'an empty header name': head([...PLAIN, ': x']),
    'a header name with a non-token character': head([...PLAIN, 'X@A: b']),
    'a DEL in a value': head([...PLAIN, 'X-A: b\x7fc']),
    'text after the version': head(['POST /v1/chat/completions HTTP/1.1 extra', 'Host: edge']),
    'two spaces after the method': head(['POST  /v1/chat/completions HTTP/1.1', 'Host: edge']),
  };
  for (const [what, bytes] of Object.entries(refused)) {
    test(`hands over ${what}`, () => {
      assert.equal(readLeanHead(bytes, LIMIT, ROUTES), undefined);
    });
  }
});
