application_id             = "wordcount"
standby_replicas           = -1
acceptable_recovery_lag    = -10000
state_cleanup_delay        = "0s"
probing_rebalance_interval = "-10m"

# expect: 2:30: error: Invalid number | The argument "standby_replicas" must be zero or greater, not -1.
# expect: 3:30: error: Invalid number | The argument "acceptable_recovery_lag" must be zero or greater, not -10000.
# expect: 4:30: error: Invalid duration | The argument "state_cleanup_delay" must be greater than zero, not "0s".
# expect: 5:30: error: Invalid duration | The argument "probing_rebalance_interval" must be greater than zero, not "-10m".
