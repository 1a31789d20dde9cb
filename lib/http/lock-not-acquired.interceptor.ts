import {
  type CallHandler,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import { catchError, type Observable, throwError } from 'rxjs';
import { LockNotAcquiredError } from '../errors/lock.errors';
import type { LockManager } from '../core/lock-manager';
import { LOCK_MANAGER } from '../lock.constants';

/**
 * On HTTP requests, turns `LockNotAcquiredError` into an HTTP error (409 by default) instead
 * of a 500, keeping the original as `cause`. RPC and WebSocket contexts are left untouched.
 */
@Injectable()
export class LockNotAcquiredInterceptor implements NestInterceptor {
  constructor(@Inject(LOCK_MANAGER) private readonly manager: LockManager) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const status = this.manager.settings.notAcquiredHttpStatus;
    if (status === false || context.getType() !== 'http') return next.handle();
    return next.handle().pipe(
      catchError((err: unknown) =>
        throwError(() =>
          err instanceof LockNotAcquiredError
            ? new HttpException(
                {
                  statusCode: status,
                  code: err.code,
                  message: 'The resource is locked by another operation; retry later.',
                },
                status,
                { cause: err },
              )
            : err,
        ),
      ),
    );
  }
}
