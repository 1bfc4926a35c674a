application_id = "wordcount"

consumer {
  group = "x"
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  metrics {}
}

# expect: 3:1: error: Unsupported block type | Blocks of type "consumer" are not expected here.
# expect: 10:3: error: Unsupported block type | Blocks of type "metrics" are not expected here.
