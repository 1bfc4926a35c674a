application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "w" {
    type        = "window"
    window_size = "1m"
    ttl         = "7d"
    ttl_clock   = "wall_clock"
  }
  store "zero" {
    ttl = "0s"
  }
  store "days" {
    ttl = "1.5d"
  }
  store "micros" {
    ttl = "1500us"
  }
  store "clock" {
    ttl       = "1h"
    ttl_clock = "event_time"
  }
  store "lonely" {
    ttl_clock = "wall_clock"
  }
  store "number" {
    ttl = 7
  }
  store "ok" {
    ttl       = "1d12h"
    ttl_clock = "wall_clock"
  }
}

# expect: 9:19: error: Attribute not applicable | The attribute "ttl" applies only to keyvalue stores; store "w" is a window store
# expect: 10:19: error: Attribute not applicable | The attribute "ttl_clock" applies only to keyvalue stores
# expect: 13:11: error: Invalid duration | The argument "ttl" must be greater than zero, not "0s".
# expect: 16:11: error: Invalid duration | such as "7d", "12h" or "1d12h"
# expect: 19:11: error: Invalid duration | The ttl "1500us" is not a whole number of milliseconds
# expect: 23:17: error: Invalid TTL clock | The ttl_clock "event_time" is not one of the valid values: "stream_time" (the default) or "wall_clock".
# expect: 26:17: warning: TTL clock not used | The ttl_clock of store "lonely" has no effect because the store has no ttl
# expect: 29:11: error: Incorrect attribute value type | The argument "ttl" must be a string
