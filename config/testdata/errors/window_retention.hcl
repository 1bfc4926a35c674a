application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "w" {
    type        = "window"
    window_size = "1m"
    grace       = "30s"
    retention   = "1m"
  }
  store "s" {
    type           = "session"
    inactivity_gap = "5m"
    retention      = "4m59s"
  }
  store "exact" {
    type           = "session"
    inactivity_gap = "5m"
    grace          = "1m"
    retention      = "6m"
  }
  store "zero" {
    type        = "window"
    window_size = "1h"
    retention   = "0s"
  }
}

# expect: 10:19: error: Retention too short | The retention "1m" of window store "w" is shorter than window_size + grace (1m30s): windows would expire before they close.
# expect: 15:22: error: Retention too short | The retention "4m59s" of session store "s" is shorter than inactivity_gap + grace (5m): sessions would expire before they close.
# expect: 26:19: error: Invalid duration | The argument "retention" must be greater than zero, not "0s".
