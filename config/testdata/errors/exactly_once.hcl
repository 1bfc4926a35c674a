application_id       = "wordcount"
processing_guarantee = "exactly_once"

# expect: 2:24: error: Unsupported processing guarantee | "exactly_once" is not supported yet: it arrives with its own issue.
