/**
 * The environment of the `codex app-server` child. The parent's environment is NOT inherited (it may hold secrets
 * the model must not see through a shell tool); only what Codex needs to run and to reach its provider passes.
 */

/**
 * Passed through when set: PATH and HOME, then the proxy and certificate variables Codex's HTTP client honours
 * (both spellings of the proxy names: tools disagree on case).
 */
export const INHERITED_ENV_VARS: readonly string[] = [
  "PATH",
  "HOME",
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "NO_PROXY",
  "no_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "NODE_EXTRA_CA_CERTS",
];

/**
 * Build the child's environment: {@link INHERITED_ENV_VARS} and `passEnv` names from `parent` when set, then
 * `RUST_LOG=warn` (stderr carries no prompt content), then `extra`, then `CODEX_HOME` (always last: it is ours).
 *
 * @example
 * ```ts
 * buildChildEnv({ parent: process.env, passEnv: ["OPENAI_API_KEY"], extra: {}, codexHome: path.join(os.homedir(), ".codex") });
 * ```
 */
export function buildChildEnv(options: {
  parent: NodeJS.ProcessEnv;
  passEnv?: readonly string[] | undefined;
  extra?: Record<string, string> | undefined;
  codexHome: string;
}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...INHERITED_ENV_VARS, ...(options.passEnv ?? [])]) {
    const value = options.parent[name];
    if (value !== undefined) env[name] = value;
  }
  env.RUST_LOG = "warn";
  Object.assign(env, options.extra ?? {});
  env.CODEX_HOME = options.codexHome;
  return env;
}
