application_id = "files"
state_dir      = "appdir"

kafka {
  brokers = ["kafka-1:9092"]
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# appdir/files is a file.
# expect: 2:18: error: Not a directory | The instance's state directory
