application_id = "wordcount"

topic "sentences" {
  partitions = = 4
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "counts" {
    backend = "rocksdb"
  }
}

# The parser recovers from a syntax error: what follows it is still checked.
# expect: 4:16: error: Invalid expression
# expect: 11:15: error: Invalid store backend
