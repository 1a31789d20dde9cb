import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from './app-config';
import { ConcurrencyGauge, type Span } from './concurrency-gauge';
import { ProviderOverloadedError } from './inventory.errors';

/** A payment the provider authorised. */
export interface Authorization {
  /** The provider's authorisation id. */
  id: string;
  amountCents: number;
  /** Provider connection the call went through (`0..limit-1`). */
  connection: number;
  /** Provider calls running in this process as this one began, itself included. */
  concurrent: number;
  /** When the call ran (compare across processes to count overlapping calls). */
  span: Span;
}

/** What the provider has seen in this process. */
export interface ProviderStats {
  limit: number;
  calls: number;
  /** Most calls ever running at once in this process. */
  maxConcurrent: number;
  /** Calls refused for exceeding the limit or reusing a busy connection. */
  overLimit: number;
}

/**
 * A stand-in for a slow external payment provider that accepts at most PAYMENT_PROVIDER_LIMIT
 * concurrent requests, one per connection (think API keys or pooled sockets numbered
 * `0..limit-1`, each carrying one request at a time). A call beyond the limit, or on a
 * connection already busy, is refused and counted, as a real provider answers 429: the counted
 * lock in front of it (checkout.service.ts) exists so that this never happens.
 *
 * It lives in the app process, so it sees this replica's calls only; the spans it returns let
 * a client check the limit across all replicas at once.
 */
@Injectable()
export class FakePaymentProvider {
  private readonly gauge = new ConcurrencyGauge();
  private readonly busy = new Set<number>();
  private refused = 0;
  private readonly limit: number;
  private readonly latencyMs: number;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.limit = config.payments.limit;
    this.latencyMs = config.payments.latencyMs;
  }

  /** Authorises `amountCents` over `connection`, taking PAYMENT_LATENCY_MS. */
  async authorize(connection: number, amountCents: number): Promise<Authorization> {
    const { value, span, concurrent } = await this.gauge.measure(async () => {
      const refusal = this.refusalOf(connection);
      if (refusal !== null) {
        this.refused++;
        throw new ProviderOverloadedError(this.limit, refusal);
      }
      this.busy.add(connection);
      try {
        await sleep(this.latencyMs);
      } finally {
        this.busy.delete(connection);
      }
      return randomUUID();
    });
    return { id: value, amountCents, connection, concurrent, span };
  }

  /** Calls, highest concurrency and refusals so far. */
  stats(): ProviderStats {
    return {
      limit: this.limit,
      calls: this.gauge.calls,
      maxConcurrent: this.gauge.max,
      overLimit: this.refused,
    };
  }

  /** Why a call starting now breaks the provider's rules, or `null`. */
  private refusalOf(connection: number): string | null {
    if (this.gauge.inProgress > this.limit) {
      return `${this.gauge.inProgress} requests in progress`;
    }
    if (!Number.isInteger(connection) || connection < 0 || connection >= this.limit) {
      return `no connection ${connection}`;
    }
    if (this.busy.has(connection)) return `connection ${connection} is busy`;
    return null;
  }
}
