/**
 * Checks of the znode paths and the connection string a zookeeper backend is configured with,
 * made at bootstrap: ZooKeeper refuses a bad path only when it is used (every call then fails
 * `BAD_ARGUMENTS`), and node-zookeeper-client takes any host list and retries it for ever.
 */

/** Host name or IPv4 address (node-zookeeper-client cannot parse IPv6: it splits on ':'). */
const HOST =
  /^[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*$/;
const PORT = /^[0-9]{1,5}$/;

/**
 * Why `path` is not an absolute znode path ZooKeeper accepts, or `undefined`: it starts with
 * `/`, has no empty element (`//`, a trailing `/`), no `.` or `..` element, and none of the
 * characters ZooKeeper refuses in a name (PathUtils.validatePath: NUL and other control
 * characters, U+007F-U+009F, surrogates, hence any character outside the BMP, private use
 * U+E000-U+F8FF, U+FFF0-U+FFFF), nor the other non-characters U+FDD0-U+FDEF.
 */
export function znodePathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return 'must start with "/"';
  if (path === '/') return 'must name a node below "/"';
  for (const element of path.slice(1).split('/')) {
    if (element === '') return 'must not contain an empty element ("//") or end with "/"';
    if (element === '.' || element === '..') return 'must not contain a "." or ".." element';
  }
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (isRefused(c)) {
      const hex = c.toString(16).toUpperCase().padStart(4, '0');
      return `must not contain U+${hex} (at index ${i}): ZooKeeper refuses control characters, surrogates (any character outside the BMP), private-use characters and non-characters in node names`;
    }
  }
  return undefined;
}

/**
 * Why `value` is not `host[:port][,host[:port]...][/chroot]`, or `undefined`. Hosts are names or
 * IPv4 addresses (port 1-65535, default 2181); the chroot, if any, is a znode path as
 * {@link znodePathProblem} has it (a lone trailing `/` means none, as for the client).
 */
export function connectionStringProblem(value: string): string | undefined {
  const slash = value.indexOf('/');
  const hosts = slash < 0 ? value : value.slice(0, slash);
  const chroot = slash < 0 ? '' : value.slice(slash);
  for (const entry of hosts.split(',')) {
    if (entry === '') return 'has an empty host entry';
    const colon = entry.lastIndexOf(':');
    const host = colon < 0 ? entry : entry.slice(0, colon);
    const port = colon < 0 ? '2181' : entry.slice(colon + 1);
    if (!HOST.test(host))
      return `${JSON.stringify(entry)} is not host[:port] (a host name or IPv4 address)`;
    if (!PORT.test(port) || Number(port) < 1 || Number(port) > 65_535) {
      return `${JSON.stringify(entry)} has no valid port (1-65535)`;
    }
  }
  if (chroot === '' || chroot === '/') return undefined;
  const problem = znodePathProblem(chroot);
  return problem && `its chroot ${JSON.stringify(chroot)} ${problem}`;
}

function isRefused(c: number): boolean {
  return (
    c <= 0x1f ||
    (c >= 0x7f && c <= 0x9f) ||
    (c >= 0xd800 && c <= 0xf8ff) ||
    (c >= 0xfdd0 && c <= 0xfdef) ||
    c >= 0xfff0
  );
}
