import {
  type CallHandler,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import { catchError, type Observable, throwError } from 'rxjs';
import {
  LockAbortedError,
  LockBackendError,
  type LockError,
  LockNotAcquiredError,
  LockShuttingDownError,
} from '../errors/lock.errors';
import { LOCK_HTTP_SETTINGS, type LockHttpSettings } from './http-settings';

/** What a client is told, per kind of lock error. */
const MESSAGES = {
  notAcquired: 'The resource is locked by another operation; retry later.',
  unavailable: 'The lock service is unavailable; retry later.',
} as const;

/**
 * On HTTP requests, turns lock errors into fitting HTTP answers instead of a 500, keeping the
 * original as `cause`: a busy lock (or a wait the caller aborted) becomes 409 by default, a
 * store failure or an application shutting down 503, each with a `Retry-After` header. RPC and
 * WebSocket contexts are left untouched.
 */
@Injectable()
export class LockErrorsInterceptor implements NestInterceptor {
  /** @internal Nest builds it with the module's HTTP settings. */
  constructor(@Inject(LOCK_HTTP_SETTINGS) private readonly settings: LockHttpSettings) {}

  /** Maps a lock error thrown by the handler (or anything it calls). */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    return next
      .handle()
      .pipe(catchError((err: unknown) => throwError(() => this.toHttp(err, context) ?? err)));
  }

  private toHttp(err: unknown, context: ExecutionContext): HttpException | undefined {
    const kind =
      err instanceof LockNotAcquiredError || err instanceof LockAbortedError
        ? 'notAcquired'
        : err instanceof LockBackendError || err instanceof LockShuttingDownError
          ? 'unavailable'
          : undefined;
    if (!kind) return undefined;
    const status =
      kind === 'notAcquired' ? this.settings.notAcquiredStatus : this.settings.unavailableStatus;
    if (status === false) return undefined;
    const retryAfter = this.settings.retryAfter[kind];
    if (retryAfter !== false) setHeader(context, 'Retry-After', String(retryAfter));
    const lockError = err as LockError;
    return new HttpException(
      { statusCode: status, code: lockError.code, message: MESSAGES[kind] },
      status,
      { cause: lockError },
    );
  }
}

/** Sets a response header on Express (`setHeader`) or Fastify (`header`) alike. */
function setHeader(context: ExecutionContext, name: string, value: string): void {
  const response = context.switchToHttp().getResponse<{
    setHeader?(n: string, v: string): unknown;
    header?(n: string, v: string): unknown;
    headersSent?: boolean;
    sent?: boolean;
  }>();
  if (response.headersSent || response.sent) return;
  if (typeof response.header === 'function') response.header(name, value);
  else response.setHeader?.(name, value);
}
