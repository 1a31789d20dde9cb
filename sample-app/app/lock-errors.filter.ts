import { type ArgumentsHost, Catch, type ExceptionFilter, Logger } from '@nestjs/common';
import { LockBackendError, LockError, LockLostError } from '../../lib/index';

/** The part of Express's response used here (`@types/express` is not a dependency). */
interface JsonResponse {
  status(code: number): { json(body: unknown): void };
}

/**
 * The library maps a busy lock to 409 by itself; the other lock errors would be 500s. Here a
 * lost lock becomes 409 (nothing was written: retrying is right) and an unreachable lock store
 * 503 (the app cannot safely take orders now), each with a body saying so.
 */
@Catch(LockLostError, LockBackendError)
export class LockErrorsFilter implements ExceptionFilter<LockError> {
  private readonly logger = new Logger(LockErrorsFilter.name);

  catch(error: LockError, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<JsonResponse>();
    if (error instanceof LockLostError) {
      response.status(409).json({
        statusCode: 409,
        code: error.code,
        message: `The lock "${error.key}" was lost while processing the request; nothing was written. Retry.`,
      });
      return;
    }
    this.logger.error(error.message);
    response.status(503).json({
      statusCode: 503,
      code: error.code,
      message:
        'The lock store is unavailable; orders cannot be taken safely right now. Retry later.',
    });
  }
}
