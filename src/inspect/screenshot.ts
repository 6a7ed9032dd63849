/**
 * Screenshots an HTML file with headless Chromium, for checking a statechart page as a person would see it. This
 * is a manual/dev tool (Chromium is not a project dependency); unit tests do not use it.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { pino, type Logger } from "pino";
import { z } from "zod";

/** Codes of {@link ScreenshotError}. */
export type ScreenshotErrorCode =
  | "SCREENSHOT_INVALID_ARGUMENT"
  /** No Chromium binary at the given (or default) path. */
  | "SCREENSHOT_NO_BROWSER"
  /** Chromium exited with an error or produced no PNG. */
  | "SCREENSHOT_FAILED";

/**
 * The error type thrown by {@link screenshotHtml}.
 *
 * @example
 * ```ts
 * const dir = os.tmpdir();
 * await screenshotHtml(path.join(dir, "page.html"), path.join(dir, "page.png")).catch((err) => {
 *   if (err instanceof ScreenshotError && err.code === "SCREENSHOT_NO_BROWSER") console.error("install chromium");
 * });
 * ```
 */
export class ScreenshotError extends Error {
  readonly code: ScreenshotErrorCode;
  constructor(code: ScreenshotErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ScreenshotError";
    this.code = code;
  }
}

const optionsSchema = z
  .object({
    width: z.number().int().min(100).max(8000).default(1600),
    height: z.number().int().min(100).max(16000).default(1200),
    /** Fragment appended to the file URL, e.g. `step=7` for the replay page. */
    hash: z.string().regex(/^[A-Za-z0-9=&_-]*$/).optional(),
    /** Chromium's virtual time budget: how long (virtual ms) scripts may run before the shot. */
    virtualTimeBudgetMs: z.number().int().min(100).max(60_000).default(5000),
    chromiumPath: z.string().min(1).default("/usr/bin/chromium"),
    timeoutMs: z.number().int().min(1000).max(300_000).default(60_000),
    logger: z.custom<Logger>().optional(),
  })
  .strict();

export type ScreenshotOptions = z.input<typeof optionsSchema>;

/**
 * Renders `htmlPath` in headless Chromium (offline-friendly flags, a fresh profile) and writes a PNG.
 *
 * @example
 * ```ts
 * const html = path.join(os.tmpdir(), "viz-check.html");
 * await writeFile(html, renderStatechartPage({ machines, trace }));
 * await screenshotHtml(html, html.replace(/\.html$/, ".png"), { width: 1600, height: 2000, hash: "step=7" });
 * ```
 */
export async function screenshotHtml(htmlPath: string, pngPath: string, options: ScreenshotOptions = {}): Promise<void> {
  const opts = parseOptions(options);
  const url = pathToFileURL(resolve(htmlPath)).href + (opts.hash ? `#${opts.hash}` : "");
  await screenshotUrl(url, pngPath, options);
}

function parseOptions(options: ScreenshotOptions): z.output<typeof optionsSchema> {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ScreenshotError(
      "SCREENSHOT_INVALID_ARGUMENT",
      `invalid screenshot option ${issue?.path.join(".") ?? "?"}: ${issue?.message ?? "invalid"}`,
    );
  }
  return parsed.data;
}

/** Runs headless Chromium on `url` with a fresh profile and the offline-friendly flags; resolves with its stdout. */
async function runChromium(url: string, opts: z.output<typeof optionsSchema>, extra: string[]): Promise<string> {
  if (!existsSync(opts.chromiumPath)) {
    throw new ScreenshotError("SCREENSHOT_NO_BROWSER", `no chromium at ${opts.chromiumPath} (apt-get install chromium)`);
  }
  // A fresh profile per run: no state from earlier runs, nothing left behind.
  const profile = await mkdtemp(join(tmpdir(), "viz-chromium-"));
  const args = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    `--user-data-dir=${profile}`,
    `--window-size=${opts.width},${opts.height}`,
    `--virtual-time-budget=${opts.virtualTimeBudgetMs}`,
    ...extra,
    url,
  ];
  try {
    return await new Promise<string>((resolvePromise, reject) => {
      execFile(opts.chromiumPath, args, { timeout: opts.timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
        if (err) {
          reject(new ScreenshotError("SCREENSHOT_FAILED", `chromium failed for ${url}: ${err.message}\n${stderr.slice(-2000)}`, { cause: err }));
        } else resolvePromise(stdout);
      });
    });
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}

/**
 * Screenshots any URL (a `file:` page, or the loopback live inspector) with headless Chromium.
 *
 * @example
 * ```ts
 * await screenshotUrl("http://127.0.0.1:8123/", path.join(os.tmpdir(), "inspector.png"), { width: 1400, height: 1000 });
 * ```
 */
export async function screenshotUrl(url: string, pngPath: string, options: ScreenshotOptions = {}): Promise<void> {
  const opts = parseOptions(options);
  const logger = opts.logger ?? pino({ level: "silent" });
  const absPng = resolve(pngPath);
  await runChromium(url, opts, [`--screenshot=${absPng}`]);
  const info = await stat(absPng).catch(() => undefined);
  if (info === undefined || info.size === 0) {
    throw new ScreenshotError("SCREENSHOT_FAILED", `chromium wrote no screenshot to ${absPng}`);
  }
  logger.info({ event: "inspect.screenshot", bytes: info.size, width: opts.width, height: opts.height }, "screenshot written");
}

/**
 * The DOM of a page after its scripts ran (Chromium `--dump-dom`), for checks a person would make by looking.
 *
 * @example
 * ```ts
 * const dom = await dumpDom(pathToFileURL(html).href + "#step=3", { width: 1400, height: 1000 });
 * ```
 */
export async function dumpDom(url: string, options: ScreenshotOptions = {}): Promise<string> {
  return runChromium(url, parseOptions(options), ["--dump-dom"]);
}
