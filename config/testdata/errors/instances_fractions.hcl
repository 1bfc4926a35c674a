application_id             = "wordcount"
standby_replicas           = 1.5
acceptable_recovery_lag    = 0.25
state_cleanup_delay        = "1500us"
probing_rebalance_interval = "1m0.0005s"

# expect: 2:30: error: Invalid number | The argument "standby_replicas" must be a whole number, not 1.5.
# expect: 3:30: error: Invalid number | The argument "acceptable_recovery_lag" must be a whole number, not 0.25.
# expect: 4:30: error: Invalid duration | The argument "state_cleanup_delay" must be a whole number of milliseconds, not "1500us".
# expect: 5:30: error: Invalid duration | The argument "probing_rebalance_interval" must be a whole number of milliseconds, not "1m0.0005s".
