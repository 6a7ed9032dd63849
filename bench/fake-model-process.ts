/**
 * The fake Responses API in its own process, answering every turn request with the reply given as argv[2], each SSE
 * event after argv[3] ms (default 0: at once). Prints
 * `{"baseUrl": ...}` on one stdout line once listening and exits when its stdin closes (so it never outlives the
 * bench). Used where the bench times work in its own process: a real model is not in the harness's event loop, so
 * the fake must not be either, or whatever the harness does during a turn delays the model's reply.
 */
import { startFakeResponsesServer } from "../src/testing/fake-responses-server.js";

const reply = process.argv[2] ?? "ok";
const delayMs = Number(process.argv[3] ?? 0);
const fake = await startFakeResponsesServer();
fake.setDefault(() => ({ text: reply, ...(delayMs > 0 ? { delayMs } : {}) }));
process.stdout.write(`${JSON.stringify({ baseUrl: fake.baseUrl })}\n`);
process.stdin.resume();
process.stdin.on("end", () => {
  void fake.close().finally(() => process.exit(0));
});
