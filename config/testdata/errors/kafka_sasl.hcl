application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  sasl {
    mechanism     = "scram-sha-512"
    username      = "app"
    password_file = "missing.password"
    password_env  = "STATEHOST_TEST_UNSET_PASSWORD"
    token_file    = "token"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 9:21: error: Two passwords | Set password_file or password_env, not both
# expect: 10:21: error: Argument not used by SCRAM-SHA-512 | token_file is for OAUTHBEARER
