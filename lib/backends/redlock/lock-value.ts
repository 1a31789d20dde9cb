/**
 * A Redlock copy's value is `<token>` (the lock round's) or `<token> <fence>` (once the
 * fencing round tagged it); owner tokens contain no space.
 */

/** The owner token of a copy's value ('' for no copy). */
export function tokenOf(value: string): string {
  const space = value.indexOf(' ');
  return space < 0 ? value : value.slice(0, space);
}

/** The holder's fence a copy's value carries, if it was tagged. */
export function fenceOf(value: string): number | undefined {
  const space = value.indexOf(' ');
  if (space < 0) return undefined;
  const fence = Number(value.slice(space + 1));
  return Number.isSafeInteger(fence) ? fence : undefined;
}
