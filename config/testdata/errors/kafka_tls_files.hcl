application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {
    ca_file   = "ok.wasm"
    cert_file = "ok.wasm"
    key_file  = "ok.wasm"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 6:17: error: Invalid CA file | holds no PEM certificate
# expect: 7:17: error: Invalid client certificate | do not make a certificate and its key
