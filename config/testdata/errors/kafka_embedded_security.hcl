application_id = "embedded"

kafka {
  replication_factor = 3
  tls {}
  sasl {
    mechanism = "GSSAPI"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 4:24: error: Replication factor above the cluster's size | the embedded broker runs: one broker
# expect: 5:3: error: Security without brokers | kafka.tls block needs kafka.brokers
# expect: 6:3: error: Security without brokers | kafka.sasl block needs kafka.brokers
# expect: 7:17: error: Invalid SASL mechanism | must be one of "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" or "OAUTHBEARER", not "GSSAPI"
