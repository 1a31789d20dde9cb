/**
 * Prometheus metrics for the sample app: an OpenTelemetry SDK meter provider with the Prometheus
 * exporter, registered globally by `startMetrics()` before the Nest app is created (the lock
 * module looks up its meter when it starts), and `GET /metrics` serving the text format.
 * The lock module's series are `lock_*`, labelled `lock_backend` (see the README's Metrics).
 */
import { Controller, Get, Header, Inject, Module, type DynamicModule } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

const EXPORTER = Symbol('PrometheusExporter');

/** Registers a global meter provider whose reader is a Prometheus exporter (no own server). */
export function startMetrics(): PrometheusExporter {
  const exporter = new PrometheusExporter({ preventServerStart: true });
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [exporter] }));
  return exporter;
}

/** `GET /metrics`: everything recorded so far, in the Prometheus text format. */
@Controller('metrics')
export class MetricsController {
  private readonly serializer = new PrometheusSerializer();

  constructor(@Inject(EXPORTER) private readonly exporter: PrometheusExporter) {}

  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  async scrape(): Promise<string> {
    const { resourceMetrics } = await this.exporter.collect();
    return this.serializer.serialize(resourceMetrics);
  }
}

/** Serves `/metrics` from the exporter `startMetrics()` returned. */
@Module({})
export class MetricsModule {
  /** The module for one exporter. */
  static forRoot(exporter: PrometheusExporter): DynamicModule {
    return {
      module: MetricsModule,
      controllers: [MetricsController],
      providers: [{ provide: EXPORTER, useValue: exporter }],
    };
  }
}
