// Property-based tests (fast-check) run with a fixed seed and a few hundred inputs in CI, and
// with many more through `npm run fuzz` (FUZZ_SCALE times the inputs, a seed of its own, printed
// so a failure can be replayed with FUZZ_SEED). Each property prints how many inputs it ran.

/** The seed CI uses; a failure found by npm run fuzz is replayed with FUZZ_SEED=<its seed>. */
const CI_SEED = 20_261_122;

export function fuzzParams(baseRuns: number): { seed: number; numRuns: number } {
  const seed = Number(process.env.FUZZ_SEED ?? CI_SEED);
  const scale = Number(process.env.FUZZ_SCALE ?? 1);
  return { seed, numRuns: Math.max(1, Math.round(baseRuns * scale)) };
}

export function reportFuzz(property: string, p: { seed: number; numRuns: number }): void {
  console.log(`fuzz: ${property}: ${p.numRuns} inputs, seed ${p.seed}, no failure`);
}

if (import.meta.main) {
  // npm run fuzz [-- --scale N] [--seed S]: the property tests with many more inputs.
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const seed = arg("seed") ?? String(Math.floor(Math.random() * 2 ** 31));
  const scale = arg("scale") ?? "50";
  console.log(
    `fuzz: seed ${seed}, ${scale} times the CI inputs (replay: npm run fuzz -- --seed ${seed} --scale ${scale})`,
  );
  const run = Bun.spawnSync([process.execPath, "test", "--timeout", "0", "_property.test.ts"], {
    cwd: new URL("../..", import.meta.url).pathname,
    env: { ...process.env, FUZZ_SEED: seed, FUZZ_SCALE: scale },
    stdout: "inherit",
    stderr: "inherit",
  });
  process.exit(run.exitCode ?? 1);
}
