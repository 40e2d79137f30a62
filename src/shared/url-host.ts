// A listen host as it goes into a URL: an IPv6 address in brackets
// (`http://[::1]:8080`), anything else as it is.
export function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** A listen host without the brackets a URL would give it: `[::1]` is `::1`, what node:net and grpc-js bind. */
export function bareHost(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** `host:port` as a dialer takes it: an IPv6 address in brackets (`[::1]:50051`). */
export function dialAddress(host: string, port: number): string {
  return `${urlHost(host)}:${port}`;
}

// host:port, host being a name, an IPv4 address or a bracketed IPv6 address.
const ADDRESS = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/;

/** The port of a `host:port` a node can dial (see ADDRESS), or 0 when `text` is not one or its port is out of range. */
export function dialPort(text: string): number {
  const match = ADDRESS.exec(text);
  const port = match === null ? 0 : Number(match[3]);
  return port >= 1 && port <= 65_535 ? port : 0;
}
