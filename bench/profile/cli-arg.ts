// The one command-line reader the profile scripts share: `--name value`.

/** The value after `--name` on this process's command line, or `fallback`. */
export function arg(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}
