application_id             = "wordcount"
standby_replicas           = 2147483648
acceptable_recovery_lag    = 9223372036854775808
state_cleanup_delay        = "10 minutes"
probing_rebalance_interval = "3000000h"

# expect: 2:30: error: Invalid number | The argument "standby_replicas" must be at most 2147483647, not 2147483648.
# expect: 3:30: error: Invalid number | The argument "acceptable_recovery_lag" must be at most 9223372036854775807, not 9.223372036854775808e+18.
# expect: 4:30: error: Invalid duration | The argument "state_cleanup_delay" must be a duration such as "500ms", "1s" or "2m30s"; "10 minutes" is not one
# expect: 5:30: error: Invalid duration | The argument "probing_rebalance_interval" must be a duration such as "500ms", "1s" or "2m30s"; "3000000h" is not one
