application_id             = "wordcount"
standby_replicas           = "1"
acceptable_recovery_lag    = true
state_cleanup_delay        = 600
probing_rebalance_interval = ["10m"]

# expect: 2:30: error: Incorrect attribute value type | The argument "standby_replicas" must be a whole number, not string.
# expect: 3:30: error: Incorrect attribute value type | The argument "acceptable_recovery_lag" must be a whole number, not bool.
# expect: 4:30: error: Incorrect attribute value type | The argument "state_cleanup_delay" must be a string, not number.
# expect: 5:30: error: Incorrect attribute value type | The argument "probing_rebalance_interval" must be a string, not tuple.
