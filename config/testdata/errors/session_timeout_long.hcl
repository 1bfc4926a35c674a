application_id  = "sessions"
session_timeout = "600h"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 2:19: error: Session timeout too long | The session_timeout "600h" is longer than 596h31m23.647s (2147483647 ms)
