application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {}
  sasl {
    mechanism     = "OAUTHBEARER"
    username      = "app"
    password_file = "ok.wasm"
    token_file    = "ok.wasm"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 8:21: error: Argument not used by OAUTHBEARER | remove username
# expect: 9:21: error: Argument not used by OAUTHBEARER | remove password_file
# expect: 10:21: error: Empty OAUTHBEARER token | The token_file is empty
