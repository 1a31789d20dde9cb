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
import { LOCK_HTTP_SETTINGS, type LockHttpSettings } from './http-settings';

/**
 * On HTTP requests, turns `LockNotAcquiredError` into an HTTP error (409 by default) instead
 * of a 500, keeping the original as `cause`. RPC and WebSocket contexts are left untouched.
 */
@Injectable()
export class LockNotAcquiredInterceptor implements NestInterceptor {
  /** @internal Nest builds it with the module's HTTP settings. */
  constructor(@Inject(LOCK_HTTP_SETTINGS) private readonly settings: LockHttpSettings) {}

  /** Maps a busy lock thrown by the handler (or anything it calls) to the configured status. */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const status = this.settings.notAcquiredStatus;
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
