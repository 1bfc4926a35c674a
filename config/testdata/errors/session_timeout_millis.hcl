application_id  = "sessions"
session_timeout = "2500500us"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 2:19: error: Invalid duration | The argument "session_timeout" must be a whole number of milliseconds, not "2500500us"
