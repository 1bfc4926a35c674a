application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {}
  sasl {
    mechanism     = "SCRAM-SHA-512"
    username      = "app" password = "same-line-secret"
    password_file = "kafka.password"
    broken-secret
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# A syntax error in the sasl block: the parser's diagnostics show no source line of it.
# expect: 8:27: error: Missing newline after argument
# expect: 10:5: error: Argument or block definition required
# not printed: same-line-secret
# not printed: broken-secret
