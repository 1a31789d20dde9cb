/** Message of an unknown thrown value (an `Error`'s message, else its string form). */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
