application_id       = "word count"
processing_guarantee = "at_most_once"
commit_interval      = "soon"
unknown              = true

kafka {
  brokers = ["localhost"]
}

topic "sentences" {
  partitions = 0
}

repartition "sentences" {
  partitions = 4
}

processor "count" {
  module  = "missing.wasm"
  inputs  = ["sentences"]
  outputs = ["sentences"]
  store "counts" {
    type    = "window"
    backend = "disk"
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "counts" {}
}

# expect: 1:24: error: Invalid application_id
# expect: 2:24: error: Invalid processing guarantee
# expect: 3:24: error: Invalid duration
# expect: 4:1: error: Unsupported argument
# expect: 7:14: error: Invalid address
# expect: 11:16: error: Invalid partition count
# expect: 14:13: error: Ambiguous repartition name
# expect: 19:13: error: Module file not found
# expect: 21:14: error: Output is an input
# expect: 22:3: error: Missing required argument | "window_size" is required for a window store
# expect: 24:15: error: Invalid store backend
# expect: 28:1: error: Duplicate processor | already defined at testdata/errors/many_errors.hcl:18.
# expect: 31:3: error: Duplicate store | already defined at testdata/errors/many_errors.hcl:22 (in processor "count").
