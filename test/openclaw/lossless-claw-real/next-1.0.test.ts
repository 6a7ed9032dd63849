/** lossless-claw 1.0.0-beta.4 (its `next/1.0` branch, vendored in test/fixtures/lossless-claw/next-1.0/) through this host: see suite.ts. */
import { describe } from "vitest";
import { losslessClawSuite } from "./suite.js";

describe("the real lossless-claw 1.0.0-beta.4", () => {
  losslessClawSuite({ dir: "next-1.0", version: "1.0.0-beta.4" });
});
