# The word-count demo: tokenize splits sentences into words, count keeps a count per word.
application_id       = "wordcount"
state_dir            = "state"
processing_guarantee = "at_least_once" # or "exactly_once": one Kafka transaction per commit
commit_interval      = "1s"

kafka {
  brokers = [] # empty: an embedded broker runs in-process
}
embedded_broker {
  listen   = "127.0.0.1:9092"
  data_dir = "state/broker"
}
admin {
  listen = "127.0.0.1:9464"
}
topic "sentences" {
  partitions = 4
  config     = { "retention.ms" = "-1" }
}
repartition "words" {
  partitions = 4
}
processor "tokenize" {
  module  = "plugins/tokenize/tokenize.wasm"
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = "plugins/count/count.wasm"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {
    type     = "keyvalue"
    backend  = "pebble"
    coalesce = false
    logging {
      enabled      = true
      topic_config = { "min.compaction.lag.ms" = "0" }
    }
  }
}
