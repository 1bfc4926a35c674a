application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  sasl {
    mechanism    = "PLAIN"
    password_env = "STATEHOST_TEST_UNSET_PASSWORD"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 5:3: error: Missing required argument | "username" is required
# expect: 6:20: warning: Password sent in plain text | without a kafka.tls block
# expect: 7:20: error: Password variable not set | The environment variable that password_env names is not set
# A password pasted in place of a name could be a valid name: the name is not printed either.
# not printed: STATEHOST_TEST_UNSET_PASSWORD
