application_id = "broker"
state_dir      = "state"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 1:18: error: State directory overlaps the broker's | deleting the application's state would delete the broker's data
