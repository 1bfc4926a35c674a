application_id = "wordcount"

processor "count" {
  module  = "ok.wasm"
  inputs  = ["words"]
  outputs = ["counts", "wordcount-totals-changelog"]
  store "counts" {}
}

processor "total" {
  module  = "ok.wasm"
  inputs  = ["counts"]
  outputs = ["wordcount-counts-changelog"]
  store "totals" {}
  store "scratch" {
    logging {
      enabled = false
    }
  }
}

processor "reader" {
  module  = "ok.wasm"
  inputs  = ["wordcount-counts-changelog"]
  outputs = ["wordcount-scratch-changelog"]
}

# Reading a changelog is allowed; writing one of a store without logging too.
# expect: 6:24: error: Output is a changelog topic | The processor "count" writes to "wordcount-totals-changelog", the changelog topic of store "totals" (at testdata/errors/changelog_output.hcl:14)
# expect: 13:14: error: Output is a changelog topic | the changelog topic of store "counts" (at testdata/errors/changelog_output.hcl:7)
