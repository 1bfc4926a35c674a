application_id = "files"
state_dir      = "ok.wasm/state"

kafka {
  brokers = ["kafka-1:9092"]
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 2:18: error: Not a directory | ok.wasm/state cannot be created:
