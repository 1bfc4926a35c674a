application_id  = "wordcount"
commit_interval = "1 second"

# expect: 2:19: error: Invalid duration | "1 second" is not one
