/**
 * Overlap of the spans the app returns (`process.hrtime.bigint()` nanoseconds as strings,
 * CLOCK_MONOTONIC, comparable across the processes of one machine): how many readers, or
 * provider calls, ran at once across every replica, which no single replica can tell.
 * A span is the interval inside the critical section, so spans of holders that excluded each
 * other never overlap: the next one starts after the previous one's end was recorded.
 */

/** `[start, end]` in nanoseconds, as the app sends them. */
export interface SpanText {
  start: string;
  end: string;
}

/** Most spans running at one instant (0 for none). Touching ends do not count as overlap. */
export function maxOverlap(spans: readonly SpanText[]): number {
  const events = spans.flatMap((span) => [
    { t: BigInt(span.start), delta: 1 },
    { t: BigInt(span.end), delta: -1 },
  ]);
  // At equal instants ends go first: a span that ends exactly when another starts is not
  // running alongside it.
  events.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : a.delta - b.delta));
  let running = 0;
  let most = 0;
  for (const { delta } of events) {
    running += delta;
    most = Math.max(most, running);
  }
  return most;
}

/** How many spans of `a` overlap at least one span of `b`. */
export function overlapping(a: readonly SpanText[], b: readonly SpanText[]): number {
  const others = b.map((span) => ({ start: BigInt(span.start), end: BigInt(span.end) }));
  return a.filter((span) => {
    const start = BigInt(span.start);
    const end = BigInt(span.end);
    return others.some((other) => start < other.end && other.start < end);
  }).length;
}

/** The `span` of an answer, if it has a well-formed one. */
export function spanOf(body: Record<string, unknown>): SpanText | null {
  const span = body.span as Partial<SpanText> | undefined;
  return typeof span?.start === 'string' && typeof span.end === 'string'
    ? { start: span.start, end: span.end }
    : null;
}
