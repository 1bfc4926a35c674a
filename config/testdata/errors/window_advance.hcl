application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "hop" {
    type        = "window"
    window_size = "1m"
    advance     = "90s"
  }
  store "zero" {
    type        = "window"
    window_size = "1m"
    advance     = "0s"
  }
  store "tumbling" {
    type        = "window"
    window_size = "1m"
    advance     = "1m"
  }
}

# expect: 9:19: error: Invalid advance | The advance "90s" of window store "hop" is longer than its window_size "1m"
# expect: 14:19: error: Invalid duration | The argument "advance" must be greater than zero, not "0s".
