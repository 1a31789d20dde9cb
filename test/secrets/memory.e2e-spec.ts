/**
 * The secret probe's own check: a configuration mistake that echoes a value (an unknown option
 * whose value is the sentinel) must not leak it either, and the probe must see what a leak
 * looks like (a control run that prints the sentinel on purpose is caught).
 */
import { describe, expect, it } from '@jest/globals';
import { leaks, runSecretProbe, SENTINEL } from './probe';

describe('secret probe (memory backend and a control)', () => {
  it('an app whose configuration holds a secret-named option never writes it', async () => {
    const result = await runSecretProbe({
      type: 'memory',
      password: SENTINEL,
    } as never);
    expect(result.codes.bootstrap).toBe('LOCK_CONFIG');
    expect(leaks(result.output)).toEqual([]);
  }, 90_000);

  it('catches a leak when there is one (control)', () => {
    expect(leaks(`line one\nAUTH ${SENTINEL} failed\n`)).toHaveLength(1);
  });
});
