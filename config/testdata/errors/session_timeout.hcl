application_id  = "sessions"
session_timeout = "1ns"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 2:19: error: Session timeout too short | The session_timeout "1ns" is shorter than 100ms, which the Kafka client refuses.
