application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {}
  sasl {
    mechanism  = "OAUTHBEARER"
    token_file = "eyJhbGciOiJub25lIn0.pasted-token-secret."
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# A token pasted in place of its file's path.
# expect: 8:18: error: Cannot read the OAUTHBEARER token | The token_file cannot be read
# not printed: pasted-token-secret
