import { Injectable, type PipeTransform } from '@nestjs/common';
import { BadInputError } from './inventory.errors';

/** SKUs become lock keys and URL segments: keep them to a short, plain alphabet. */
const SKU = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Validates the `:sku` route parameter (400 otherwise). */
@Injectable()
export class SkuPipe implements PipeTransform<string, string> {
  transform(value: string): string {
    if (!SKU.test(value)) {
      throw new BadInputError(
        `sku must be 1-64 characters of letters, digits, ".", "_" or "-", starting with a letter or digit; got "${value}"`,
      );
    }
    return value;
  }
}

/**
 * Validates an integer field of a JSON body (400 otherwise). Strict on purpose: `"3"`,
 * `1.5`, `1e3` as a string, `true` or a missing field are refused rather than coerced, since
 * a quantity the client did not mean is worse than an error.
 */
export class IntegerFieldPipe implements PipeTransform<unknown, number | undefined> {
  constructor(
    private readonly field: string,
    private readonly min: number,
    private readonly max: number,
    private readonly optional = false,
  ) {}

  transform(value: unknown): number | undefined {
    if (value === undefined && this.optional) return undefined;
    if (
      typeof value !== 'number' ||
      !Number.isInteger(value) ||
      value < this.min ||
      value > this.max
    ) {
      const shown = value === undefined ? 'nothing' : JSON.stringify(value);
      throw new BadInputError(
        `${this.field} must be an integer from ${this.min} to ${this.max} (a JSON number), got ${shown}`,
      );
    }
    return value;
  }
}
