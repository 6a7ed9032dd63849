/** lossless-claw 0.15.3 (its `main` branch, vendored in test/fixtures/lossless-claw/main/) through this host: see suite.ts. */
import { describe } from "vitest";
import { losslessClawSuite } from "./suite.js";

describe("the real lossless-claw 0.15.3", () => {
  losslessClawSuite({ dir: "main", version: "0.15.3" });
});
