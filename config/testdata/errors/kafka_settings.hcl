application_id = "settings"

kafka {
  brokers            = ["kafka-1:9092"]
  client_id          = ""
  compression        = "brotli"
  linger             = "1500us"
  batch_size         = "100B"
  fetch_max_bytes    = "2GiB"
  request_timeout    = "0s"
  replication_factor = 0
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# expect: 5:24: error: Invalid client_id | must be printable ASCII and not empty
# expect: 6:24: error: Invalid compression | one of "none", "gzip", "snappy", "lz4" or "zstd", not "brotli"
# expect: 7:24: error: Invalid duration | "linger" must be a whole number of milliseconds, not "1500us"
# expect: 8:24: error: Invalid byte size | "batch_size" must be from 1KiB to 1GiB
# expect: 9:24: error: Invalid byte size | "fetch_max_bytes" must be from 64KiB to 1GiB
# expect: 10:24: error: Invalid duration | "request_timeout" must be greater than zero
# expect: 11:24: error: Invalid replication_factor | at least 1
