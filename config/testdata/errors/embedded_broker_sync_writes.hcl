application_id = "wordcount"

embedded_broker {
  sync_writes = "yes"
}

# expect: 4:17: error: Incorrect attribute value type | The argument "sync_writes" must be true or false, not string.
