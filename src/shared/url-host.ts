// A listen host as it goes into a URL: an IPv6 address in brackets
// (`http://[::1]:8080`), anything else as it is.
export function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
