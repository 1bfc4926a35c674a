application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {}
  sasl {
    mechanism     = "SCRAM-SHA-256"
    username      = "app"
    password_file = "hunter2-pasted-file-secret"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# A password pasted in place of its file's path.
# expect: 9:21: error: Cannot read the password file | The password_file cannot be read
# not printed: hunter2-pasted-file-secret
