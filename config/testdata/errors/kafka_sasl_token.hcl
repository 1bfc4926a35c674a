application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {}
  sasl {
    mechanism = "OAUTHBEARER"
    token     = "eyJhbGciOiJub25lIn0.inline-token-secret."
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 8:5: error: Token written in the configuration | token_file
# not printed: inline-token-secret
