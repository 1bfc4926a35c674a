application_id = "wordcount"

topic "sentences" {
  partitions = 4
  config = {
    "retention.ms"   = -1
    "cleanup.policy" = { nested = "compact" }
    "segment.ms"     = ["1"]
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["sentences"]
  store "counts" {
    logging {
      enabled      = "yes"
      topic_config = "min.compaction.lag.ms=0"
    }
  }
}

# expect: 7:24: error: Invalid map value | The value of "cleanup.policy" in "config" must be a string, number or bool, not object.
# expect: 8:24: error: Invalid map value | must be a string, number or bool, not tuple.
# expect: 17:22: error: Incorrect attribute value type | The argument "enabled" must be true or false, not string.
# expect: 18:22: error: Incorrect attribute value type | The argument "topic_config" must be a map of strings
