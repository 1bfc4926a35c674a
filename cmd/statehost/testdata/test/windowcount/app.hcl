# windowcount on tumbling windows of 10s with 2s of grace, for statehost test (the test
# puts windowcount.wasm beside this file).
application_id = "clicks"
topic "clicks" {
  partitions = 2
}
processor "windowcount" {
  module  = "windowcount.wasm"
  inputs  = ["clicks"]
  outputs = ["click-counts"]
  store "windows" {
    type        = "window"
    window_size = "10s"
    grace       = "2s"
  }
}
