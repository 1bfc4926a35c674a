application_id = "secured"

kafka {
  brokers          = ["kafka-1:9093"]
  sasl_jaas_config = "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"app\" password=\"jaas-secret\";"
  tls {}
  sasl {
    mechanism     = "SCRAM-SHA-512"
    username      = "app"
    password_file = "kafka.password"
    pwd           = "pwd-secret"
    jaas {
      passphrase = "nested-secret"
    }
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# Secrets in arguments and blocks the schema does not know.
# expect: 5:3: error: Unsupported argument | "sasl_jaas_config" is not expected here
# expect: 11:5: error: Unsupported argument | "pwd" is not expected here
# expect: 12:5: error: Unsupported block type | Blocks of type "jaas" are not expected here
# not printed: jaas-secret
# not printed: pwd-secret
# not printed: nested-secret
