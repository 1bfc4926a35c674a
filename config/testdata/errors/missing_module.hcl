application_id = "wordcount"

processor "count" {
  module = "plugins/missing.wasm"
  inputs = ["words"]
}

processor "tokenize" {
  inputs = ["sentences"]
}

processor "dir" {
  module = "."
  inputs = ["sentences"]
}

# expect: 4:12: error: Module file not found | testdata/errors/plugins/missing.wasm does not exist
# expect: 8:1: error: Missing required argument | The argument "module" is required
# expect: 13:12: error: Module is not a file | testdata/errors is not a regular file
