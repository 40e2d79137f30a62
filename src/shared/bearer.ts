// The credential of an `Authorization: Bearer <token>` header, as every
// listener of the edge reads it (client API, admin, bootstrap): the scheme in
// any case, then one or more spaces or tabs (RFC 9110 §11.1, §11.6.2).
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The token the header carries; undefined when there is no header or it is not a Bearer one. */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  return BEARER.exec(authorization)?.[1];
}
