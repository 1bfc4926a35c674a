application_id = "files"

embedded_broker {
  data_dir = "ok.wasm"
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 4:14: error: Not a directory | The embedded broker's data_dir
