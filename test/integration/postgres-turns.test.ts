/**
 * Real turns (the real `codex app-server` against the fake Responses API) with `store:` a PostgreSQL session store:
 * the conversation continues on its bound thread across turns and store objects (as another host would open it), the
 * model receives the same inputs as with the file store, and a lease taken over mid-turn stops the attempt with
 * SESSION_LOCK_COMPROMISED and nothing of it written.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresSessionStores, type PostgresSessionStores } from "../../src/postgres/index.js";
import { inputMessageTexts, startOfflineCodex, type OfflineCodex } from "../../src/testing/index.js";
import { runCodexTurn, startCodexTurn } from "../../src/turn.js";
import { createTestDatabase, type TestDatabase } from "../helpers/postgres.js";
import { disposeChecked, messageText, requestThreadId, tempSessions, turnParams, until } from "../helpers/turn-env.js";

let env: OfflineCodex;
let db: TestDatabase;
let pool: pg.Pool;
let stores: PostgresSessionStores;
const sessions = tempSessions("pg-turns-");

beforeAll(async () => {
  [env, db] = await Promise.all([startOfflineCodex(), createTestDatabase()]);
  pool = new pg.Pool({ connectionString: db.url, max: 6 });
  stores = createPostgresSessionStores({ pool, leaseMs: 3_000, heartbeatMs: 250 });
  await stores.migrate();
}, 60_000);
afterAll(async () => {
  await disposeChecked(env);
  await stores?.close();
  await pool?.end();
  await db?.drop();
  sessions.cleanup();
});

const prompts = ["first question", "second question", "third question"];

/** Run the three prompts on a store (a fresh store object per turn, as separate hosts would); the model's inputs. */
async function conversation(storeFor: () => Omit<Parameters<typeof runCodexTurn>[0], "prompt">): Promise<{ inputs: string[][]; threads: string[] }> {
  const inputs: string[][] = [];
  const threads: string[] = [];
  for (const [i, prompt] of prompts.entries()) {
    const before = env.fake.requests.length;
    env.fake.enqueue({ text: `answer ${i + 1}` });
    const r = await runCodexTurn({ ...storeFor(), prompt });
    expect(r.status, JSON.stringify(r.error)).toBe("completed");
    const req = env.fake.requests.slice(before).find((q) => q.requestKind === "turn")!;
    inputs.push(inputMessageTexts(req.body));
    threads.push(requestThreadId(req));
  }
  return { inputs, threads };
}

describe("turns on the PostgreSQL store", () => {
  it("three turns: mirrored once each, resumed on one thread, the model's inputs as with the file store", async () => {
    const pgRun = await conversation(() => ({ appServer: env.codex, sessionId: "pg-chat", store: stores.session("pg-chat") }));
    const file = sessions.file("file-chat");
    const fileRun = await conversation(() => turnParams(env, file, ""));
    expect(new Set(pgRun.threads).size).toBe(1);
    expect(pgRun.inputs).toEqual(fileRun.inputs);
    const store = stores.session("pg-chat");
    const history = await store.readHistory();
    expect(history.messages.map(messageText)).toEqual(["first question", "answer 1", "second question", "answer 2", "third question", "answer 3"]);
    expect((await store.readBinding())?.threadId).toBe(pgRun.threads[0]);
    expect(await store.hasPending()).toBe(false);
    const left = await pool.query("select (select count(*) from codex_turn.pending)::int as pending, (select count(*) from codex_turn.leases)::int as leases");
    expect(left.rows[0]).toEqual({ pending: 0, leases: 0 });
  }, 120_000);

  it("a lease taken over mid-turn: the attempt fails SESSION_LOCK_COMPROMISED and writes nothing of the turn", async () => {
    env.fake.enqueue({ text: Array.from({ length: 200 }, (_, i) => `w${i} `), delayMs: 50 });
    let deltas = 0;
    const handle = startCodexTurn({
      appServer: env.codex,
      sessionId: "pg-taken",
      store: stores.session("pg-taken"),
      prompt: "a long turn",
      onEvent: (e) => void (e.type === "agentMessageDelta" && deltas++),
    });
    await until(() => deltas > 2, 20_000, "the turn to stream");
    await pool.query("update codex_turn.leases set token = nextval('codex_turn.fence_seq'), owner = 'another host' where session_id = 'pg-taken'");
    const r = await handle.result;
    expect(r.status).toBe("failed");
    expect(r.error).toMatchObject({ code: "SESSION_LOCK_COMPROMISED" });
    expect((await stores.session("pg-taken").readHistory()).messages).toEqual([]);
    await pool.query("delete from codex_turn.leases where session_id = 'pg-taken'");
  }, 60_000);
});
