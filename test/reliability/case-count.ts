/**
 * Fault-case accounting. vitest isolates test files, so the grand total comes from this registry: each suite
 * declares its case count here, `recordCases` checks the suite really drives that many (a drift fails the file),
 * and every reliability file prints the grand total once it finishes.
 */
import { afterAll } from "vitest";

/** Cases per suite, across all files of test/reliability. */
export const RELIABILITY_CASES = {
  "engine-faults": 17,
  "finalize-replay": 1,
  "abort-machine": 20,
  "abort-real": 7,
  "model-faults": 4,
  "app-server-kill": 3,
  "rpc-lines": 2,
  "torn-transcript": 1,
  "corrupt-pending-record": 1,
  "sidecar-set-aside": 2,
  "crash-finalize": 6,
  concurrency: 4,
  "machine-property": 400,
} as const;

export type ReliabilitySuite = keyof typeof RELIABILITY_CASES;

export const RELIABILITY_TOTAL = Object.values(RELIABILITY_CASES).reduce((a, b) => a + b, 0);

const recorded = new Map<string, number>();
let registered = false;

/** Record that `suite` drives `n` cases (must match the registry) and print the total after the file. */
export function recordCases(suite: ReliabilitySuite, n: number): void {
  if (RELIABILITY_CASES[suite] !== n) {
    throw new Error(`reliability suite ${suite} drives ${n} cases but the registry says ${RELIABILITY_CASES[suite]}`);
  }
  recorded.set(suite, n);
  if (!registered) {
    registered = true;
    afterAll(() => {
      const here = [...recorded].map(([k, v]) => `${k}=${v}`).join(" ");
      console.log(`reliability cases: this file ${here}; all reliability suites total=${RELIABILITY_TOTAL}`);
    });
  }
}
