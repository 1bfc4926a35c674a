application_id       = "wordcount"
processing_guarantee = "exactly_once"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 2:24: warning: Exactly-once on the embedded broker | read_committed readers then skip every later transaction of this instance
