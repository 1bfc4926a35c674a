application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {
    ca_file              = "missing-ca.pem"
    cert_file            = "ok.wasm"
    insecure_skip_verify = true
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 6:28: error: Cannot read the CA file | missing-ca.pem cannot be read: no such file or directory
# expect: 7:28: error: Client certificate without a key | needs a key_file
# expect: 8:28: warning: TLS certificates not verified | for tests only
