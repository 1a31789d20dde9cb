/**
 * `npm run test:chaos [-- --profile ci|full] [--backend <id>] [--fault <id>]`: runs the chaos
 * matrix, prints it and writes the report (see report.ts).
 */
import { stopAll } from '../support/redis-servers';
import { stopAllZk } from '../support/zk-servers';
import { PROFILES, runMatrix, type ChaosProfile } from './matrix';

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const profile = PROFILES[(flag('profile') ?? 'full') as ChaosProfile['name']];
  if (!profile) throw new Error(`unknown profile ${flag('profile')}: use ci or full`);
  const run = await runMatrix(profile, {
    only: { backend: flag('backend'), fault: flag('fault') },
    onCell: (c) =>
      console.log(
        `${c.backend.padEnd(18)} ${c.fault.padEnd(20)} ${c.verdict.padEnd(6)} overlaps=${c.overlaps} fence=${c.fenceViolations} lost=${c.lostUpdates} staleRej=${c.staleRejected} staleAcc=${c.staleAccepted} recovery=${c.recoveryMs}/${c.boundMs} sections=${c.sections} ${c.durationMs}ms ${c.findings.join(' || ')}`,
      ),
  });
  console.log(
    `${run.cells.length} cells, ${run.cells.filter((c) => c.verdict === 'FAIL').length} failed`,
  );
}

main()
  .catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(async () => {
    await stopAll();
    await stopAllZk();
  });
