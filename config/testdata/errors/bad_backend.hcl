application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "counts" {
    backend = "rocksdb"
  }
}

# expect: 7:15: error: Invalid store backend | "rocksdb" is not one of the valid values: "pebble" (the default) or "memory".
