application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "counts" {
    logging {
      enabled      = false
      topic_config = { "min.compaction.lag.ms" = "0" }
    }
  }
}

# expect: 9:22: warning: Changelog config not used | has no effect because its logging is disabled
