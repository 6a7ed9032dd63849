/** The one directory-fsync helper of the transcript sidecars (transcript, binding, pending record, reset). */
export { fsyncDirectory } from "./small-file.js";
