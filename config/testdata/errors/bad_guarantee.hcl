application_id       = "wordcount"
processing_guarantee = "at_most_once"

# expect: 2:24: error: Invalid processing guarantee | "at_most_once" is not one of the valid values: "at_least_once" (the default) or "exactly_once".
