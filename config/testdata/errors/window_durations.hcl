application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "w" {
    type                           = "window"
    window_size                    = "-1m"
    grace                          = "-1s"
    retention                      = "1 day"
    changelog_additional_retention = "-1h"
  }
  store "s" {
    type                           = "session"
    inactivity_gap                 = "0s"
    grace                          = "0s"
    changelog_additional_retention = "0s"
  }
  store "micro" {
    type        = "window"
    window_size = "1500us"
    grace       = "1ms"
  }
  store "quiet" {
    type                           = "session"
    inactivity_gap                 = "1m"
    changelog_additional_retention = "1h"
    logging {
      enabled = false
    }
  }
}

# expect: 8:38: error: Invalid duration | The argument "window_size" must be greater than zero, not "-1m".
# expect: 9:38: error: Invalid duration | The argument "grace" must be zero or greater, not "-1s".
# expect: 10:38: error: Invalid duration | "1 day" is not one
# expect: 11:38: error: Invalid duration | The argument "changelog_additional_retention" must be zero or greater, not "-1h".
# expect: 15:38: error: Invalid duration | The argument "inactivity_gap" must be greater than zero, not "0s".
# expect: 21:19: error: Invalid duration | The window_size "1500us" is not a whole number of milliseconds
# expect: 27:38: warning: Changelog config not used | The changelog_additional_retention of store "quiet" has no effect because its logging is disabled
