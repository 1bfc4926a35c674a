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
    type        = "table"
    window_size = "soon"
    grace       = "1s"
  }
}

# expect: 6:3: error: Missing required argument | "window_size" is required for a window store
# expect: 9:3: error: Missing required argument | "inactivity_gap" is required for a session store
# expect: 13:19: error: Invalid store type | The store type "table" is not one of the valid values: "keyvalue" (the default), "window" or "session".
# expect: 14:19: error: Invalid duration | "soon" is not one
