application_id = "app"

processor "a" {
  module   = "ok.wasm"
  inputs   = ["in"]
  on_error = "ignore"
}

processor "b" {
  module   = "ok.wasm"
  inputs   = ["in", "app-b-dlq"]
  on_error = "dead_letter"
}

processor "c" {
  module   = "ok.wasm"
  inputs   = ["in"]
  on_error = true
}

# expect: 6:14: error: Invalid on_error | The on_error policy "ignore" is not one of the valid values: "fail" (the default), "skip" or "dead_letter".
# expect: 11:21: error: Input is the dead-letter topic | The processor "b" reads "app-b-dlq", its own dead-letter topic (on_error at testdata/errors/on_error.hcl:12)
# expect: 18:14: error: Incorrect attribute value type | The argument "on_error" must be a string, not bool.
