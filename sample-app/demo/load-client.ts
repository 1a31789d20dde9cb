/**
 * The load client: fires many concurrent orders at one or more app instances and tallies the
 * answers. Also the JSON request helper the demo and the e2e tests use.
 */

/** A JSON response. */
export interface JsonReply {
  status: number;
  body: Record<string, unknown>;
}

/** What a load run saw. */
export interface LoadResult {
  /** Orders sent. */
  orders: number;
  /** 201: order accepted. */
  accepted: number;
  /** 422 SOLD_OUT. */
  soldOut: number;
  /** 409 LOCK_NOT_ACQUIRED: the lock stayed busy for the whole wait. */
  busy: number;
  /** Other 409s (STALE_FENCE, LOCK_LOST, CONTENTION). */
  conflicts: number;
  /** Anything else (5xx, network errors): a bug or an outage. */
  failed: number;
  /** Count per response `code` (`CREATED` for 201, `NETWORK` for no response). */
  byCode: Record<string, number>;
  /** First few unexpected answers, for diagnosis. */
  failures: string[];
  /** Wall time of the whole run. */
  elapsedMs: number;
  /** When the last accepted order was answered, from the start (0 if none). */
  lastAcceptedMs: number;
}

/** Options of `runLoad`. */
export interface LoadOptions {
  /** App base URLs; orders are spread across them. */
  targets: readonly string[];
  sku: string;
  orders: number;
  /** Units per order (default 1). */
  qty?: number;
  /** Orders in flight per target at any moment. */
  concurrencyPerTarget: number;
  /** Called after every answer. */
  onProgress?: (done: number, result: LoadResult) => void;
}

const REQUEST_TIMEOUT_MS = 60_000;
const KEPT_FAILURES = 5;

/** Sends a JSON request; resolves any HTTP status (only a network failure rejects). */
export async function callJson(method: string, url: string, body?: unknown): Promise<JsonReply> {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? {} : JSON.parse(text);
  } catch {
    parsed = { raw: text };
  }
  const record =
    typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : { value: parsed };
  return { status: response.status, body: record };
}

/**
 * Sends `orders` orders of `qty` units for `sku`, keeping `concurrencyPerTarget` in flight on
 * each target, and tallies the answers.
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const qty = options.qty ?? 1;
  const result: LoadResult = {
    orders: options.orders,
    accepted: 0,
    soldOut: 0,
    busy: 0,
    conflicts: 0,
    failed: 0,
    byCode: {},
    failures: [],
    elapsedMs: 0,
    lastAcceptedMs: 0,
  };
  const started = performance.now();
  let next = 0;
  let done = 0;

  await keepInFlight(
    options.targets,
    options.concurrencyPerTarget,
    () => next < options.orders,
    async (target) => {
      next++;
      const reply = await tryCallJson('POST', `${target}/inventory/${options.sku}/deduct`, {
        qty,
      });
      tally(result, reply, target);
      if (reply.status === 201) result.lastAcceptedMs = performance.now() - started;
      done++;
      options.onProgress?.(done, result);
    },
  );
  result.elapsedMs = performance.now() - started;
  return result;
}

/** `callJson`, with a network failure answered as status 0, code `NETWORK`, instead of thrown. */
export function tryCallJson(method: string, url: string, body?: unknown): Promise<JsonReply> {
  return callJson(method, url, body).catch((err: unknown): JsonReply => ({
    status: 0,
    body: { code: 'NETWORK', message: err instanceof Error ? err.message : String(err) },
  }));
}

/**
 * Keeps `perTarget` requests in flight on each target for as long as `more()` says so: each
 * worker runs `step(target)` again as soon as its previous one settles. `step` must claim its
 * piece of work before its first `await`, so that `more()` sees it at once.
 */
export async function keepInFlight(
  targets: readonly string[],
  perTarget: number,
  more: () => boolean,
  step: (target: string) => Promise<void>,
): Promise<void> {
  const worker = async (target: string): Promise<void> => {
    while (more()) await step(target);
  };
  await Promise.all(
    targets.flatMap((target) => Array.from({ length: perTarget }, () => worker(target))),
  );
}

function tally(result: LoadResult, reply: JsonReply, target: string): void {
  const code =
    reply.status === 201
      ? 'CREATED'
      : typeof reply.body.code === 'string'
        ? reply.body.code
        : `HTTP_${reply.status}`;
  result.byCode[code] = (result.byCode[code] ?? 0) + 1;
  if (reply.status === 201) result.accepted++;
  else if (reply.status === 422 && code === 'SOLD_OUT') result.soldOut++;
  else if (reply.status === 409 && code === 'LOCK_NOT_ACQUIRED') result.busy++;
  else if (reply.status === 409) result.conflicts++;
  else {
    result.failed++;
    if (result.failures.length < KEPT_FAILURES) {
      result.failures.push(`${target}: ${reply.status} ${JSON.stringify(reply.body)}`);
    }
  }
}
