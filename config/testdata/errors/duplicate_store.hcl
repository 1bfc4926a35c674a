application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "counts" {}
}

processor "recount" {
  module = "ok.wasm"
  inputs = ["sentences"]
  store "totals" {}
  store "counts" {
    backend = "memory"
  }
}

# expect: 13:3: error: Duplicate store | The store "counts" is already defined at testdata/errors/duplicate_store.hcl:6 (in processor "count").
