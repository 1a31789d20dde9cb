import type { Logger } from 'typeorm';

/**
 * A TypeORM logger that only counts statements: TypeORM calls `logQuery` for every statement it
 * sends (START TRANSACTION and COMMIT included) whatever the logging setting, so this is the
 * number of store calls a typeorm backend made, counted in the client at the cost of one
 * increment each.
 */
export class StatementCounter implements Logger {
  /** Statements sent so far. */
  count = 0;

  logQuery(): void {
    this.count++;
  }
  logQueryError(): void {
    // errors reach the caller as exceptions
  }
  logQuerySlow(): void {
    // no maxQueryExecutionTime is set
  }
  logSchemaBuild(): void {
    // createTable's statements are not lock traffic
  }
  logMigration(): void {
    // no migrations
  }
  log(): void {
    // nothing worth keeping
  }
}
