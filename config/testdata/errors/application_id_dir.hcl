application_id = ".."

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 1:18: error: Invalid application_id | is not a directory name
