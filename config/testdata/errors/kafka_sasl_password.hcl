application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {}
  sasl {
    mechanism = "SCRAM-SHA-512"
    username  = "app"
    password  = "hunter2-inline-secret"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# The password is never written in the configuration, and never printed: neither the
# message nor the source lines of the diagnostic show it.
# expect: 9:5: error: Password written in the configuration | password_file
# not printed: hunter2-inline-secret
