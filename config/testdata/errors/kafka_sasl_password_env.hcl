application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {}
  sasl {
    mechanism    = "SCRAM-SHA-256"
    username     = "app"
    password_env = "hunter2 pasted/env-secret"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# A password pasted in place of the name of its environment variable.
# expect: 9:20: error: Invalid password_env | must name an environment variable
# not printed: pasted/env-secret
