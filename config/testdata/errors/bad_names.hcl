application_id = "wordcount"

topic ".." {
  partitions = 1
}

processor ".hidden" {
  module = "ok.wasm"
  inputs = ["sentences"]
}

processor "a/b" {
  module = "ok.wasm"
  inputs = ["sentences"]
  store "my store" {}
}

# expect: 3:7: error: Invalid topic name | The topic name ".." is not allowed by Kafka.
# expect: 7:11: error: Invalid processor name | The processor name ".hidden" must not start with '.'.
# expect: 12:11: error: Invalid processor name | The processor name "a/b" may contain only
# expect: 15:9: error: Invalid store name | The store name "my store" may contain only
