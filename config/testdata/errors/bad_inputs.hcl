application_id = "wordcount"

processor "none" {
  module = "ok.wasm"
}

processor "empty" {
  module = "ok.wasm"
  inputs = []
}

processor "twice" {
  module  = "ok.wasm"
  inputs  = ["words", "sentences", "words"]
  outputs = ["counts", "counts", "bad topic"]
}

# expect: 3:1: error: Missing required argument | The argument "inputs" is required
# expect: 9:12: error: No inputs | The processor "empty" must read at least one topic
# expect: 14:36: error: Duplicate input | The input "words" is already listed at testdata/errors/bad_inputs.hcl:14.
# expect: 15:24: error: Duplicate output | The output "counts" is already listed
# expect: 15:34: error: Invalid topic name | The output topic name "bad topic" may contain only
