import { describe, expect, it } from '@jest/globals';
import { compareInterleaved, type Variant } from '../../bench/harness/rounds';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('compareInterleaved', () => {
  it('gives every variant its share of each round, and no variant always follows the same one', async () => {
    const turns: number[] = [];
    // One operation outlasts a 20 ms slice, so every slice is one call: `turns` is the order.
    const variants: Variant[] = [0, 1, 2].map((i) => ({
      name: `v${i}`,
      op: async () => {
        turns.push(i);
        await sleep(21);
      },
    }));
    const results = await compareInterleaved(variants, { rounds: 2, roundMs: 150, warmupMs: 0 });
    const counted = turns.slice(3); // after each variant's warm-up call
    for (const i of [0, 1, 2]) {
      const mine = counted.filter((t) => t === i).length;
      expect(mine).toBeGreaterThanOrEqual(Math.floor(counted.length / 3) - 2);
      const before = new Set(counted.flatMap((t, k) => (t === i && k > 0 ? [counted[k - 1]] : [])));
      expect(before.size).toBeGreaterThanOrEqual(2);
    }
    expect(results.map((r) => r.perRound.length)).toEqual([2, 2, 2]);
  });
});
