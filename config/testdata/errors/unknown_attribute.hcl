application_id = "wordcount"
commit_intervall = "1s"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "counts" {
    backends = "memory"
  }
}

# expect: 2:1: error: Unsupported argument | "commit_intervall" is not expected here. Did you mean "commit_interval"?
# expect: 8:5: error: Unsupported argument | Did you mean "backend"?
