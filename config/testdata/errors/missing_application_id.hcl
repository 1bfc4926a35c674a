state_dir = "state"

# expect: 1:1: error: Missing required argument | The argument "application_id" is required
