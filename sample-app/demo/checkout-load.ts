/**
 * Concurrent checkouts across the app instances: each pays the fake provider under the counted
 * lock, and the spans and connections of the provider calls show whether the limit held
 * across every instance at once.
 */
import { FailureLog } from './failure-log';
import { callJson, keepInFlight, tryCallJson } from './load-client';
import { maxOverlap, spanOf, type SpanText } from './spans';

/** Options of `runCheckoutLoad`. */
export interface CheckoutLoadOptions {
  /** App base URLs; checkouts are spread across them. */
  targets: readonly string[];
  /** A SKU whose price is set. */
  sku: string;
  checkouts: number;
  /** Checkouts in flight per target. */
  concurrencyPerTarget: number;
  /** Called after every answer, with how many checkouts are done. */
  onProgress?: (done: number) => void;
}

/** What a checkout load run saw. */
export interface CheckoutLoadResult {
  checkouts: number;
  /** 201: paid. */
  paid: number;
  /** 503 PROVIDER_OVERLOADED answers, plus refusals the providers counted (should be equal). */
  overLimit: number;
  /** Most provider calls running at once, across every instance. */
  maxConcurrentCalls: number;
  /** Provider connections (lock permits) used, ascending. */
  connections: number[];
  /** Most calls running at once on one connection (1: no two calls ever shared one). */
  maxCallsPerConnection: number;
  /** Other unexpected answers (5xx, 409, network). */
  failed: number;
  failures: string[];
  elapsedMs: number;
}

/** Fires `checkouts` one-unit checkouts and tallies the provider calls. */
export async function runCheckoutLoad(options: CheckoutLoadOptions): Promise<CheckoutLoadResult> {
  const started = performance.now();
  const failures = new FailureLog();
  const calls: Array<{ connection: number; span: SpanText }> = [];
  let overloaded = 0;
  let next = 0;
  let done = 0;
  await keepInFlight(
    options.targets,
    options.concurrencyPerTarget,
    () => next < options.checkouts,
    async (target) => {
      next++;
      const reply = await tryCallJson('POST', `${target}/checkout/${options.sku}`, { qty: 1 });
      const payment = (reply.body.payment ?? {}) as Record<string, unknown>;
      const span = spanOf(payment);
      if (reply.status === 201 && span !== null && typeof payment.connection === 'number') {
        calls.push({ connection: payment.connection, span });
      } else if (reply.body.code === 'PROVIDER_OVERLOADED') overloaded++;
      else failures.add(target, reply);
      options.onProgress?.(++done);
    },
  );
  const elapsedMs = performance.now() - started;
  // The providers' own count, in case a refusal was answered in some other way.
  let refusedByProviders = 0;
  for (const target of options.targets) {
    const stats = await callJson('GET', `${target}/payments/provider`);
    refusedByProviders += Number(stats.body.overLimit);
  }
  const connections = [...new Set(calls.map((call) => call.connection))].sort((a, b) => a - b);
  return {
    checkouts: options.checkouts,
    paid: calls.length,
    overLimit: Math.max(overloaded, refusedByProviders),
    maxConcurrentCalls: maxOverlap(calls.map((call) => call.span)),
    connections,
    maxCallsPerConnection: Math.max(
      0,
      ...connections.map((connection) =>
        maxOverlap(calls.filter((c) => c.connection === connection).map((c) => c.span)),
      ),
    ),
    failed: failures.count,
    failures: failures.samples,
    elapsedMs,
  };
}
