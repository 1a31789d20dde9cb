// Beside the server harnesses because both the chaos matrix and the benchmarks record it.
import { cpus, release, type as osType } from 'node:os';

/** The machine a run happens on (OS, CPUs, Node), recorded in its report. */
export function machineLine(): string {
  const cpu = cpus()[0]?.model.trim() ?? 'cpu';
  return `${osType()} ${release()}, ${cpus().length} × ${cpu}, Node ${process.version}`;
}
