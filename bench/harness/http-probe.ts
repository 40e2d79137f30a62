// Readiness checks: does something answer HTTP on this URL (any status), or
// does a request through a proxy reach the mock with a 2xx?
import { request } from 'undici';

export async function answers(url: string): Promise<boolean> {
  try {
    const res = await request(url, { headersTimeout: 1_000, bodyTimeout: 1_000 });
    await res.body.dump();
    return true;
  } catch {
    return false;
  }
}

export async function postOk(url: string, headers: Readonly<Record<string, string>>, body: Buffer): Promise<boolean> {
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body,
      headersTimeout: 2_000,
      bodyTimeout: 2_000,
    });
    await res.body.dump();
    return res.statusCode >= 200 && res.statusCode <= 299;
  } catch {
    return false;
  }
}
