/**
 * Message of an unknown thrown value: its `message` when it has one (an `Error`, also one from
 * another realm, such as Node's socket errors under a VM sandbox), else its string form.
 */
export function messageOf(err: unknown): string {
  const message = (err as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(err);
}
