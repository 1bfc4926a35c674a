application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

processor "count" {
  module = "ok.wasm"
  inputs = ["sentences"]
}

# expect: 8:1: error: Duplicate processor | The processor "count" is already defined at testdata/errors/duplicate_processor.hcl:3.
