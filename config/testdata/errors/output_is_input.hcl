application_id = "wordcount"

repartition "words" {
  partitions = 4
}

processor "loop" {
  module  = "ok.wasm"
  inputs  = ["sentences", "words"]
  outputs = ["sentences"]
}

processor "loop2" {
  module  = "ok.wasm"
  inputs  = ["wordcount-words-repartition"]
  outputs = ["words"]
}

# expect: 10:14: error: Output is an input | The processor "loop" writes to "sentences", which it also reads (input at testdata/errors/output_is_input.hcl:9)
# expect: 16:14: error: Output is an input | writes to "wordcount-words-repartition", which it also reads
