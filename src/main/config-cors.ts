// The `cors` config section: which browser origins may call the client API
// directly (an app using the OpenAI or Anthropic SDK in the browser). Off
// unless origins are listed: a key typed into a web page is the operator's
// choice to allow, not a default. Parsed here so the section stays one
// concern; src/workers/http/cors.ts answers with it.
import type { ConfigReader } from '../shared/config-reader.js';
import type { CorsConfig } from '../shared/config-types.js';

const DEFAULT_CORS_MAX_AGE_S = 600;
/** Chromium caps a preflight's cache at 2 hours, Firefox at 24: more says nothing. */
const MAX_CORS_MAX_AGE_S = 86_400;
const ORIGIN = /^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]+$/;

export function readCors(r: ConfigReader, raw: unknown): CorsConfig | undefined {
  const section = r.object('cors', raw, true);
  if (section === undefined) return undefined;
  r.noUnknownKeys('cors', section, ['allowed_origins', 'max_age_s']);
  const origins: string[] = [];
  r.list('cors.allowed_origins', section.allowed_origins, true).forEach((value, i) => {
    const origin = readOrigin(r, `cors.allowed_origins[${i}]`, value);
    if (origin !== undefined && !origins.includes(origin)) origins.push(origin);
  });
  if (origins.includes('*') && origins.length > 1) r.problems.push('cors.allowed_origins: `*` allows every origin; list it alone or list the origins');
  const maxAgeS = r.integer('cors.max_age_s', section.max_age_s, 0, MAX_CORS_MAX_AGE_S, DEFAULT_CORS_MAX_AGE_S);
  // No origin listed is CORS off, the same config as no section.
  return origins.length === 0 ? undefined : { allowedOrigins: origins, maxAgeS };
}

/** An origin as a browser sends it in `Origin`: scheme and host (and a port that is not the scheme's default), lower-case, no path. */
function readOrigin(r: ConfigReader, path: string, value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0) {
    r.problem(path, 'an origin such as "https://app.example.com", or "*"', value);
    return undefined;
  }
  if (value === '*') return value;
  const origin = value.toLowerCase();
  let canonical: string | undefined;
  if (ORIGIN.test(origin)) {
    try {
      const url = new URL(origin);
      // http(s): the form browsers send (no default port); other schemes (an extension's) have an opaque origin in WHATWG URL.
      canonical = url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : origin;
    } catch {
      canonical = undefined;
    }
  }
  if (canonical === undefined) {
    r.problem(path, 'an origin: scheme://host[:port] with no path, such as "https://app.example.com", or "*"', value);
    return undefined;
  }
  if (canonical !== origin) {
    r.problems.push(`${path}: browsers send this origin as ${JSON.stringify(canonical)}; write it that way`);
    return undefined;
  }
  return origin;
}
