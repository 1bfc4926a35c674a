application_id = "wordcount"

topic "sentences" {
  partitions = 0
}

repartition "words" {
  partitions = -2
}

topic "half" {
  partitions = 1.5
}

topic "text" {
  partitions = "4"
}

topic "none" {
}

topic "huge" {
  partitions = 99999999999999999999
}

topic "minus" {
  partitions = -99999999999999999999
}

topic "just" {
  partitions = 2147483648
}

# expect: 4:16: error: Invalid partition count | at least 1 (and at most 2147483647), not 0.
# expect: 8:16: error: Invalid partition count | not -2.
# expect: 12:16: error: Invalid partition count | whole number, not 1.5.
# expect: 16:16: error: Incorrect attribute value type | must be a whole number, not string.
# expect: 19:1: error: Missing required argument | The argument "partitions" is required
# expect: 23:16: error: Partition count too large | The partition count 9.9999999999999999999e+19 is too large: a Kafka topic has at most 2147483647 partitions
# expect: 27:16: error: Invalid partition count | at least 1 (and at most 2147483647), not -9.9999999999999999999e+19.
# expect: 31:16: error: Partition count too large | The partition count 2147483648 is too large
