// The statehost SDK for AssemblyScript: write a stream processor, build it with asc, and the
// statehost host runs it against its stores and output topics. See README.md.

export {
  Code, DEFAULT_STORE_VERSION, Level, MAX_EMIT_BYTES, MAX_EMIT_HEADERS, MAX_LOG_LEN, MAX_OPEN_ITERATORS, NO_TIME,
  Punctuation, RESERVED_KEY, StoreType, codeText,
} from "./abi";
export { bytes, str } from "./bytes";
export { Context, Header, PunctuationContext, Record, RecordContext, log } from "./context";
export { MigrateFn, Migration, ProcessFn, PunctuateFn, Registration, register, setError } from "./guest";
export { EntryIterator, KeyValueIterator, KeyValueStore } from "./store";
export { SessionStore, StoreInfo, WindowIterator, WindowStore, windowStarts } from "./window";
