application_id = "wordcount"

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
  store "s" {
    type           = "session"
    inactivity_gap = "5m"
    window_size    = "1m"
    advance        = "1m"
    coalesce       = true
  }
  store "w" {
    type           = "window"
    window_size    = "1m"
    inactivity_gap = "5m"
    coalesce       = true
  }
  store "kv" {
    type      = "keyvalue"
    retention = "1h"
  }
  store "default" {
    grace                          = "1s"
    changelog_additional_retention = "1h"
  }
  store "ok" {
    type        = "window"
    window_size = "1m"
    coalesce    = false
  }
}

# expect: 9:22: error: Attribute not applicable | The attribute "window_size" applies only to window stores; store "s" is a session store.
# expect: 10:22: error: Attribute not applicable | The attribute "advance" applies only to window stores; store "s" is a session store.
# expect: 11:22: error: Coalesce not supported | The store "s" is a session store: coalesce = true is supported only for keyvalue stores.
# expect: 16:22: error: Attribute not applicable | The attribute "inactivity_gap" applies only to session stores; store "w" is a window store.
# expect: 17:22: error: Coalesce not supported | The store "w" is a window store
# expect: 21:17: error: Attribute not applicable | The attribute "retention" applies only to window and session stores; store "kv" is a keyvalue store.
# expect: 24:38: error: Attribute not applicable | The attribute "grace" applies only to window and session stores; store "default" is a keyvalue store (the default when type is not set).
# expect: 25:38: error: Attribute not applicable | "changelog_additional_retention" applies only to window and session stores
