application_id = "ports"

embedded_broker {
  listen = "127.0.0.1:9092"
}

admin {
  listen = "localhost:9092"
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 4:12: error: Listen address clash | The embedded broker's listener "127.0.0.1:9092" wants the address of the admin listener "localhost:9092"
# expect: 8:12: error: Listen address clash | The admin listener "localhost:9092" wants the address of the embedded broker's listener "127.0.0.1:9092", which runs in the same process
