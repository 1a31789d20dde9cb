/**
 * A network namespace for one chaos worker: a veth pair on a /30 of 10.231.0.0/16 that no
 * interface of the host is on, its first address on the host side, its second in the namespace
 * (the chaos spec files run two at a time, and other checkouts may run the matrix on the same
 * machine: two links on one subnet would take each other's traffic). The worker reaches the
 * stores through proxies the runner opens on the host address; a partition takes the
 * namespace's link down (the Unix-socket fenced resource and the witness file, being on the
 * shared filesystem, stay reachable), a heal brings it up again. Needs root and iproute2;
 * `netnsUnavailable()` says why not otherwise.
 */
import { execFileSync } from 'node:child_process';

/** A namespace made by {@link createNetns}. */
export interface Netns {
  readonly name: string;
  /** Address of the host side: where proxies for the namespace listen. */
  readonly hostAddress: string;
  /** Prefix for a command to run inside: `['ip', 'netns', 'exec', name]`. */
  readonly exec: readonly string[];
  partition(): void;
  heal(): void;
  destroy(): void;
}

const ip = (...args: string[]): string =>
  execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** Why namespaces cannot be used here, or `null` when they can. */
export function netnsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'not root: ip netns needs CAP_SYS_ADMIN';
  try {
    ip('-V');
  } catch {
    return 'iproute2 (`ip`) is not installed';
  }
  return null;
}

let counter = 0;

/** Subnets of 4 addresses in 10.231.0.0/16. */
const SUBNETS = 16_384;

/**
 * The host and namespace addresses of a /30 in 10.231.0.0/16 whose host address no interface
 * has (every user of the range puts a host side on it), searched from a place that depends on
 * the pid and the count, so that processes setting up at the same moment start far apart.
 */
function freeSubnet(): [string, string] {
  const used = ip('-4', '-o', 'addr', 'show');
  const start = (process.pid * 64 + counter) % SUBNETS;
  for (let i = 0; i < SUBNETS; i++) {
    const base = ((start + i) % SUBNETS) * 4;
    const at = (k: number) => `10.231.${Math.floor(base / 256)}.${(base % 256) + k}`;
    if (!used.includes(` ${at(1)}/`)) return [at(1), at(2)];
  }
  throw new Error('no free /30 in 10.231.0.0/16');
}

/** Creates a namespace with its veth link up and loopback up. */
export function createNetns(): Netns {
  const [hostAddress, nsAddress] = freeSubnet();
  counter++;
  const name = `ndl-chaos-${process.pid}-${counter}`;
  const hostIf = `ndlh${process.pid % 10000}x${counter}`;
  const nsIf = `ndln${process.pid % 10000}x${counter}`;
  ip('netns', 'add', name);
  try {
    ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
    ip('link', 'set', nsIf, 'netns', name);
    ip('addr', 'add', `${hostAddress}/30`, 'dev', hostIf);
    ip('link', 'set', hostIf, 'up');
    ip('netns', 'exec', name, 'ip', 'addr', 'add', `${nsAddress}/30`, 'dev', nsIf);
    ip('netns', 'exec', name, 'ip', 'link', 'set', nsIf, 'up');
    ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
  } catch (err) {
    destroy();
    throw err;
  }
  function destroy(): void {
    // Deleting the namespace deletes its end of the veth pair, and with it the host end.
    try {
      ip('netns', 'del', name);
    } catch {
      /* already gone */
    }
    try {
      ip('link', 'del', hostIf);
    } catch {
      /* went with the namespace */
    }
  }
  return {
    name,
    hostAddress,
    exec: ['ip', 'netns', 'exec', name],
    partition: () => ip('netns', 'exec', name, 'ip', 'link', 'set', nsIf, 'down'),
    heal: () => ip('netns', 'exec', name, 'ip', 'link', 'set', nsIf, 'up'),
    destroy,
  };
}
