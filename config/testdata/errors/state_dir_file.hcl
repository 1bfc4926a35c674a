application_id = "files"
state_dir      = "ok.wasm"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 2:18: error: Not a directory | The state_dir
