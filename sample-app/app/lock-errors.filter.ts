import { type ArgumentsHost, Catch, type ExceptionFilter } from '@nestjs/common';
import { LockLostError } from '../../lib/index';

/** The part of Express's response used here (`@types/express` is not a dependency). */
interface JsonResponse {
  status(code: number): { json(body: unknown): void };
}

/**
 * The library maps a busy lock to 409, and a lock store that failed (or an app shutting down)
 * to 503, each with `Retry-After`, by itself. A lock lost while the handler ran is the app's to
 * answer: here it becomes 409, since nothing was written and retrying is right.
 */
@Catch(LockLostError)
export class LockErrorsFilter implements ExceptionFilter<LockLostError> {
  catch(error: LockLostError, host: ArgumentsHost): void {
    host
      .switchToHttp()
      .getResponse<JsonResponse>()
      .status(409)
      .json({
        statusCode: 409,
        code: error.code,
        message: `The lock "${error.key}" was lost while processing the request; nothing was written. Retry.`,
      });
  }
}
