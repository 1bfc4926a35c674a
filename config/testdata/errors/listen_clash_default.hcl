application_id = "ports"

admin {
  listen = ":9092"
  token  = "s3cret-for-tests"
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 4:12: error: Listen address clash | The admin listener ":9092" wants the address of the embedded broker's listener "127.0.0.1:9092" (the default embedded_broker.listen)
