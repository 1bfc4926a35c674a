application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "per-minute" {
    type = "window"
  }
  store "sessions" {
    type = "session"
  }
  store "other" {
    type = "table"
  }
}

# expect: 7:12: error: Unsupported store type | "window" is not supported yet: it arrives with its own issue.
# expect: 10:12: error: Unsupported store type | "session" is not supported yet
# expect: 13:12: error: Invalid store type | "table" is not one of the valid values
