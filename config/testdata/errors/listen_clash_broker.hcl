application_id = "ports"

kafka {
  brokers = ["kafka-1:9092", "127.0.0.1:9093"]
}

admin {
  listen = "[::]:9093"
  token  = "s3cret-for-tests"
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 8:12: error: Listen address clash | The admin listener "[::]:9093" wants the address of the broker "127.0.0.1:9093" of kafka.brokers, which is on this machine
