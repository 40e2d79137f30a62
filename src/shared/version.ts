// The package version, read once from package.json (shipped beside dist/).
import { readFileSync } from 'node:fs';

function readVersion(): string {
  for (const candidate of ['../../package.json', '../../../package.json']) {
    try {
      const text = readFileSync(new URL(candidate, import.meta.url), 'utf8');
      const parsed = JSON.parse(text) as { name?: string; version?: string };
      if (parsed.name === 'llm-edge-gateway' && parsed.version) return parsed.version;
    } catch {
      // try the next location (src/ vs dist/src/)
    }
  }
  return '0.0.0';
}

export const VERSION = readVersion();
