application_id  = "wordcount"
commit_interval = "-5s"

# expect: 2:19: error: Invalid duration | must be greater than zero, not "-5s"
