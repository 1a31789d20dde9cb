import {
  BadRequestException,
  HttpStatus,
  ServiceUnavailableException,
  ConflictException,
  NotFoundException,
  UnprocessableEntityException,
} from '@nestjs/common';

// Every error body has `statusCode`, a stable `code` and a sentence saying what to do, like
// the library's own 409 for a busy lock (`code: 'LOCK_NOT_ACQUIRED'`). 409 means "retrying
// may succeed"; 422 means "it will not, as asked".

/** 400: a malformed SKU, quantity or other input. */
export class BadInputError extends BadRequestException {
  constructor(message: string) {
    super({ statusCode: 400, code: 'BAD_INPUT', message });
  }
}

/** 404: no product with this SKU. */
export class UnknownSkuError extends NotFoundException {
  constructor(sku: string) {
    super({ statusCode: 404, code: 'UNKNOWN_SKU', message: `No product with SKU "${sku}".` });
  }
}

/** 422: not enough stock for the order. */
export class SoldOutError extends UnprocessableEntityException {
  constructor(sku: string, available: number, requested: number, detail = '') {
    super({
      statusCode: 422,
      code: 'SOLD_OUT',
      message: `SKU "${sku}" has ${available} left, ${requested} requested.${detail}`,
      available,
    });
  }
}

/**
 * 409: the write carried a fence older than the last accepted one. This holder's lock expired
 * (a pause, a slow store) and another holder has since written: the fence at the database
 * refused what the holder alone could not know was unsafe.
 */
export class StaleFenceError extends ConflictException {
  constructor(key: string, fence: number, current: number, what = 'the stock') {
    super({
      statusCode: 409,
      code: 'STALE_FENCE',
      message: `The lock "${key}" was lost and taken over (our fence ${fence}, ${what} was already written with fence ${current}); the write was refused. Retry.`,
    });
  }
}

/** 409: optimistic mode gave up after too many concurrent writers won the race. */
export class ContentionError extends ConflictException {
  constructor(sku: string, attempts: number) {
    super({
      statusCode: 409,
      code: 'CONTENTION',
      message: `SKU "${sku}" changed under us ${attempts} times in a row (optimistic mode); retry later.`,
    });
  }
}

/** 409: a segmented product is only served in lock mode (its stock is split per lock key). */
export class SegmentedNeedsLockError extends ConflictException {
  constructor(sku: string) {
    super({
      statusCode: 409,
      code: 'SEGMENTED_NEEDS_LOCK',
      message: `SKU "${sku}" has segmented stock, which this instance (DEDUCT_MODE other than lock) does not serve.`,
    });
  }
}

/** 404: no price line for this SKU (`PUT /prices/:sku` sets one). */
export class NoPriceError extends NotFoundException {
  constructor(sku: string) {
    super({
      statusCode: 404,
      code: 'NO_PRICE',
      message: `SKU "${sku}" has no price; set one first.`,
    });
  }
}

/**
 * 503: the payment provider refused a call beyond its concurrency limit, as real providers
 * answer 429. Behind the counted lock it never happens; it is how the fake provider reports
 * a caller that did not respect the limit.
 */
export class ProviderOverloadedError extends ServiceUnavailableException {
  constructor(limit: number, detail: string) {
    super({
      statusCode: HttpStatus.SERVICE_UNAVAILABLE,
      code: 'PROVIDER_OVERLOADED',
      message: `The payment provider allows ${limit} concurrent requests: ${detail}. Retry later.`,
    });
  }
}
